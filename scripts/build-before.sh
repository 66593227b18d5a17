#!/usr/bin/env bash
# Builds the "before" binary of the storage-stack issue's benchmark (scripts/stack-bench.sh):
# the engine of 57a347f (before the issue's work) under the benchmark harness of e8cda02 (the
# first with issue 24's instrument: every phase ends with `finish_deferred`, timed), so that
# both binaries checkpoint between phases and charge the same deferred work. The old engine
# gains the one method the harness calls, `finish_deferred` (a sync and a checkpoint, as `Db`
# has since), and the harness loses one line the old engine cannot answer (`sylva check`'s
# report of damage to the older meta page).
#
#   scripts/build-before.sh DIR      # a git worktree at DIR; the binary: DIR/target/release/sylva
set -euo pipefail
dir=$1
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
git -C "$repo" worktree add --detach "$dir" e8cda02
cd "$dir"
git checkout 57a347f -- crates/sylva
python3 - <<'PY'
p = "crates/sylva/src/db/mod.rs"
s = open(p).read()
old = """    fn sync(&self) -> Result<()> {
        Db::sync(self)
    }

    fn stats(&self) -> Stats {"""
new = """    fn sync(&self) -> Result<()> {
        Db::sync(self)
    }

    fn finish_deferred(&self) -> Result<()> {
        Db::sync(self)?;
        self.checkpoint()
    }

    fn stats(&self) -> Stats {"""
assert s.count(old) == 1
open(p, "w").write(s.replace(old, new))
p = "crates/sylva-cli/src/tools.rs"
s = open(p).read()
old = "let older_meta = db.recovery().older_meta_damage.clone();"
assert s.count(old) == 1
open(p, "w").write(s.replace(old, "let older_meta: Option<String> = None;"))
PY
git show e8cda02:crates/sylva/src/kv.rs > crates/sylva/src/kv.rs
cargo build --release -p sylva-cli
