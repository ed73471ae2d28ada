//! `madvise`: madvise(2) over a page range of a region, and what the advice
//! does to the tokens its pages are checked against.

use crate::exec::Child;
use crate::region::{Tokens, PAGE};
use mmsim_spec::Advice;

pub(super) fn run(
    c: &mut Child,
    region: &str,
    advice: Advice,
    offset: u64,
    length: Option<u64>,
) -> Result<(), String> {
    let r = c
        .regions
        .get_mut(region)
        .ok_or_else(|| format!("no region {region}"))?;
    let first = offset as usize;
    let n = length.unwrap_or(r.pages - offset) as usize;
    // SAFETY: a page range inside the region's mapping.
    let rc = unsafe {
        libc::madvise(
            r.addr.add(first * PAGE) as *mut libc::c_void,
            n * PAGE,
            flag(advice),
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        let hint = match (advice, &r.tokens) {
            (Advice::Free, Tokens::Shared { .. } | Tokens::FilePrivate { .. }) => {
                " (MADV_FREE takes only private anonymous memory)"
            }
            _ => "",
        };
        return Err(format!(
            "madvise({}) of {region} pages {first}..{}: {e}{hint}",
            advice.name(),
            first + n,
        ));
    }
    match (advice, &r.tokens) {
        // Private anonymous pages are dropped: zero-fill next.
        (Advice::Dontneed, Tokens::Private(t)) => t.clear(first..first + n),
        // Shared pages are only unmapped here: the data stays in the
        // shared object (page cache or swap).
        (Advice::Dontneed, Tokens::Shared { .. }) => {}
        // Private copies are dropped: the file's page is read again next.
        (Advice::Dontneed, Tokens::FilePrivate { own, .. }) => own.clear(first..first + n),
        // Lazily freed: either value until written again.
        (Advice::Free, Tokens::Private(t)) => t.set_lazy(first..first + n, true),
        // The kernel took MADV_FREE only on private anonymous memory.
        (Advice::Free, Tokens::Shared { .. } | Tokens::FilePrivate { .. }) => {}
        (
            Advice::Pageout
            | Advice::Cold
            | Advice::Willneed
            | Advice::Sequential
            | Advice::Random
            | Advice::Normal
            | Advice::Hugepage
            | Advice::Nohugepage,
            _,
        ) => {}
    }
    Ok(())
}

/// The MADV_ constant of an advice.
fn flag(advice: Advice) -> libc::c_int {
    match advice {
        Advice::Sequential => libc::MADV_SEQUENTIAL,
        Advice::Random => libc::MADV_RANDOM,
        Advice::Normal => libc::MADV_NORMAL,
        Advice::Pageout => libc::MADV_PAGEOUT,
        Advice::Cold => libc::MADV_COLD,
        Advice::Dontneed => libc::MADV_DONTNEED,
        Advice::Free => libc::MADV_FREE,
        Advice::Willneed => libc::MADV_WILLNEED,
        Advice::Hugepage => libc::MADV_HUGEPAGE,
        Advice::Nohugepage => libc::MADV_NOHUGEPAGE,
    }
}
