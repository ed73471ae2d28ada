//! `drop_caches`: `echo 3 > /proc/sys/vm/drop_caches`.

pub(super) fn run() -> Result<(), String> {
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("cannot write \"3\" to /proc/sys/vm/drop_caches: {e}"))
}
