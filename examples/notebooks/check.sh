#!/usr/bin/env bash
# Executes every notebook of examples/notebooks headlessly on the evcxr `rust` kernel and fails
# if any cell fails. Installs what it needs, pinned, under $DRIFT_NB_TOOLS (default
# ~/.cache/drift-notebooks): evcxr_jupyter with `cargo install --locked`, nbconvert in a venv.
#
#   examples/notebooks/check.sh            # execute into a scratch folder (the committed files stay)
#   examples/notebooks/check.sh --write    # execute in place: the outputs are committed
#   examples/notebooks/check.sh --write advantages.ipynb   # only some notebooks
#
# evcxr runs with `init.evcxr` = `:opt 0` (cells compile fast), `:cache 2000` and
# `:preserve_vars_on_panic 0` (a panicking cell is an error, not a silent pass). Its build folder
# has a Cargo config building every dependency (drift and candle included) at opt-level 3, as
# the workspace's dev profile does: candle unoptimised is far too slow to run the studies.
set -euo pipefail
cd "$(dirname "$0")"
EVCXR_VERSION=0.22.0
TOOLS=${DRIFT_NB_TOOLS:-$HOME/.cache/drift-notebooks}
mkdir -p "$TOOLS"
TOOLS=$(cd "$TOOLS" && pwd)
write=0
if [ "${1:-}" = "--write" ]; then write=1; shift; fi
notebooks=("$@")
if [ ${#notebooks[@]} -eq 0 ]; then notebooks=(*.ipynb); fi
start=$(date +%s)
log() { echo "[notebooks $(( $(date +%s) - start )) s] $*"; }

# 1. The kernel (`cargo install` is a no-op when this version is already there).
if [ ! -x "$TOOLS/evcxr/bin/evcxr_jupyter" ]; then
  log "installing evcxr_jupyter $EVCXR_VERSION (cargo install --locked; about 13-17 min cold)"
fi
cargo install --quiet --locked "evcxr_jupyter@$EVCXR_VERSION" --root "$TOOLS/evcxr"
# evcxr infers the types of a cell's variables with rust-analyzer, which reads the standard
# library's sources: make sure they are there (a no-op when they are).
if command -v rustup >/dev/null 2>&1; then
  rustup component add rust-src >/dev/null 2>&1 || log "warning: could not add rust-src"
fi
# 2. nbconvert.
if [ ! -x "$TOOLS/venv/bin/jupyter-nbconvert" ]; then
  log "installing nbconvert"
  python3 -m venv "$TOOLS/venv"
  "$TOOLS/venv/bin/pip" install --quiet -r requirements.txt
fi
export PATH="$TOOLS/evcxr/bin:$TOOLS/venv/bin:$PATH"
# 3. evcxr's configuration, its build folder and the kernel spec, all under $TOOLS.
export EVCXR_CONFIG_DIR="$TOOLS/config"
mkdir -p "$EVCXR_CONFIG_DIR" "$TOOLS/build/tmp" "$TOOLS/build/.cargo"
printf ':opt 0\n:cache 2000\n:preserve_vars_on_panic 0\n' > "$EVCXR_CONFIG_DIR/init.evcxr"
cat > "$TOOLS/build/.cargo/config.toml" <<'TOML'
[profile.dev.package."*"]
opt-level = 3
debug = false
TOML
export EVCXR_TMPDIR="$TOOLS/build/tmp"
# evcxr loads each cell as a shared object linked to the toolchain's libstd-*.so, found through
# a RUNPATH relative to `target/<triple>/debug/deps`; evcxr 0.22 loads it from `debug/` one
# level up, so when $TOOLS and the toolchain share a prefix (both under $HOME, as in CI) the
# relative path misses and dlopen fails ("Kernel died before replying to kernel_info"). Name
# the toolchain's library folder explicitly: LD_LIBRARY_PATH is searched before RUNPATH.
host=$(rustc -vV | sed -n 's/^host: //p')
export LD_LIBRARY_PATH="$(rustc --print sysroot)/lib/rustlib/$host/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export XDG_CACHE_HOME="$TOOLS/cache"
export JUPYTER_DATA_DIR="$TOOLS/jupyter"
export JUPYTER_PATH="$TOOLS/jupyter"
evcxr_jupyter --install >/dev/null
# 4. Run.
out=$(mktemp -d)
failed=()
for nb in "${notebooks[@]}"; do
  log "executing $nb"
  t0=$(date +%s)
  args=(--to notebook --execute --ExecutePreprocessor.kernel_name=rust
        --ExecutePreprocessor.timeout=1800 --ExecutePreprocessor.startup_timeout=600)
  if [ $write = 1 ]; then args+=(--inplace); else args+=(--output-dir "$out"); fi
  if jupyter nbconvert "${args[@]}" "$nb"; then
    log "ok: $nb ($(( $(date +%s) - t0 )) s)"
  else
    log "FAILED: $nb ($(( $(date +%s) - t0 )) s)"
    failed+=("$nb")
  fi
done
rm -rf "$out"
if [ ${#failed[@]} -gt 0 ]; then
  echo "notebook check failed: ${failed[*]}" >&2
  exit 1
fi
log "all ${#notebooks[@]} notebooks ran"
