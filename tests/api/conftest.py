"""Fixtures of the black-box API suite: the real whisperd with the real
tiny.en on 127.0.0.1 (one daemon per test file), stopped with SIGTERM and
required to exit 0.

The whole run exits 77 (CTest's skip) when build/daemon/whisperd (or
$WHISPERD_BIN) or models/ggml-tiny.en.bin is missing.
"""

import os

import pytest

import wd_api
from wd_api import Daemon, start_daemon, stop_daemon


def pytest_sessionstart(session):
    missing = [p for p in (wd_api.WHISPERD, wd_api.TINY_EN) if not os.path.exists(p)]
    if missing:
        pytest.exit("SKIP: the API suite needs " + " and ".join(missing)
                    + " (scripts/build.sh release; scripts/fetch-model.sh tiny.en)", returncode=77)
    with open(wd_api.WHISPERD, "rb") as f:
        if b"the HTTP daemon is not built yet" in f.read():
            pytest.exit(f"SKIP: {wd_api.WHISPERD} has no `serve` yet (a placeholder)",
                        returncode=77)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for d in Daemon.live[-3:]:
            rep.sections.append((f"whisperd log (port {d.port}, {d.log_path})", d.log_tail(80)))


@pytest.fixture(scope="module")
def daemon():
    """tiny.en with two aliases, default options otherwise."""
    d = start_daemon(args=["--model-alias", "tiny-alias,my-whisper"])
    yield d
    stop_daemon(d)


@pytest.fixture(scope="module")
def base_daemon():
    """The multilingual base model (translations), when fetched."""
    if not os.path.exists(wd_api.BASE):
        pytest.skip(f"{wd_api.BASE} missing (scripts/fetch-model.sh base)")
    d = start_daemon(model=wd_api.BASE)
    yield d
    stop_daemon(d)

