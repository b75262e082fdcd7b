# Sourced by tests/cli/*.sh (not a test itself): the arguments every CLI test gets
# (MEMRA DATA_DIR SHARED_DIR), a scratch folder removed on exit, the tiny f32 model, and fail().
memra=$1
data=$2
shared=${3:-}
model=$data/models/qwen35-tiny-f32.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
