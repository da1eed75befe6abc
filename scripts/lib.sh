# Sourced by the bench scripts: a work directory ($work) and the processes
# they start ($pids), both cleaned up when the script exits. Set WORK_PARENT
# first to make the work directory under it.
work=$(mktemp -d -p "${WORK_PARENT:-${TMPDIR:-/tmp}}")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
