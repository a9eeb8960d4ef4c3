#!/bin/sh
# Usage: replay.sh REPLAY_BINARY CORPUS_DIR REGRESSION_DIR
#
# The fuzz-regress test of one target: its replay binary (replay.c) runs every file of the corpus,
# which must hold some, and every crasher saved in the regression dir, which may be missing or
# empty (none found yet; git keeps no empty directory). Then checks the binary fed exactly as many
# inputs as the two directories hold, so no input is silently left out.
set -eu
bin=$1
corpus=$2
regression=$3

count() {
    if [ -d "$1" ]; then
        find -L "$1" -mindepth 1 -maxdepth 1 -type f | wc -l
    else
        echo 0
    fi
}

want_corpus=$(count "$corpus")
want_regression=$(count "$regression")
if [ "$want_corpus" -eq 0 ]; then
    echo "replay.sh: $corpus holds no inputs" >&2
    exit 1
fi
set -- "$corpus"
if [ "$want_regression" -gt 0 ]; then
    set -- "$@" "$regression"
fi
status=0
out=$("$bin" "$@") || status=$?
printf '%s\n' "$out"
if [ "$status" -ne 0 ]; then
    echo "replay.sh: $bin exited with status $status" >&2
    exit "$status"
fi
got=$(printf '%s\n' "$out" | sed -n 's/^replayed \([0-9][0-9]*\) inputs$/\1/p' | tail -n 1)
want=$((want_corpus + want_regression))
if [ "$got" != "$want" ]; then
    echo "replay.sh: replayed ${got:-no} inputs, but $corpus and $regression hold $want" >&2
    exit 1
fi
echo "replay.sh: all $want_corpus corpus inputs and $want_regression crashers replayed"
