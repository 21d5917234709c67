#!/usr/bin/env bash
# Every flag and command that `whisperd --help` lists is in whisperd(8), and
# the page has no option --help lacks. Both come from daemon/config.c's
# tables (daemon/config_man.c); this catches a renderer that skips a row or
# a flag added to one rendering only.
# Usage: man_options.sh WHISPERD MAN_PAGE
set -euo pipefail
bin=$1 page=$2
[ -s "$page" ] || { echo "man_options: $page is missing or empty"; exit 1; }
help=$("$bin" --help)
# The page as plain text: font escapes dropped, \- as -, \e as \.
text=$(sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/\\&//g' "$page")
# A flag is the first one on its tag: --help's option lines ("  -m, --model
# PATH ...") and the line after each .TP on the page; flags named in help
# prose do not count.
flags() { sed -nE 's/^ *(-[a-zA-Z], )?(--(\[no-\])?[a-z][a-z0-9-]*).*/\2/p' | sort -u; }
help_flags=$(echo "$help" | flags)
man_flags=$(echo "$text" | grep -A1 '^\.TP' | grep -v '^\.TP' | flags)
n=$(echo "$help_flags" | wc -l)
[ "$n" -ge 10 ] || { echo "man_options: only $n flags in --help: the pattern broke"; exit 1; }
status=0
missing=$(comm -23 <(echo "$help_flags") <(echo "$man_flags"))
extra=$(comm -13 <(echo "$help_flags") <(echo "$man_flags"))
[ -z "$missing" ] || { echo "man_options: in --help, not in the man page:" $missing; status=1; }
[ -z "$extra" ] || { echo "man_options: in the man page, not in --help:" $extra; status=1; }
# Commands: the first word of each line of --help's Commands section.
cmds=$(echo "$help" | sed -n '/^Commands:/,/^$/p' | sed -n 's/^  \([a-z]*\).*/\1/p')
for c in $cmds; do
  echo "$text" | grep -A1 '^\.TP' | grep -q "^\\\\fB$c\\\\fR\|^$c\b\|^$c " \
    || { echo "man_options: command '$c' is not in the man page"; status=1; }
done
[ $status -eq 0 ] && echo "man_options: $n flags and $(echo $cmds | wc -w) commands agree"
exit $status
