//! `swapoff` and `swapon` of a `[[swap]]` device the setup made.

use crate::exec::Child;

pub(super) fn run(c: &mut Child, device: usize, on: bool) -> Result<(), String> {
    let node = c
        .swaps
        .get(device)
        .ok_or_else(|| format!("there is no swap device {device}"))?;
    let r = if on { node.swapon() } else { node.swapoff() };
    r.map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EINVAL) if !on => " (is it off already?)",
            Some(libc::EBUSY) if on => " (is it on already?)",
            _ => "",
        };
        format!(
            "{} {} (swap[{device}]): {e}{hint}",
            if on { "swapon" } else { "swapoff" },
            node.path
        )
    })
}
