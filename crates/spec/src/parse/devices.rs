//! `[[swap]]`, `[[disk]]` and `[[file]]`: the devices and the files on them.

use super::fields::{
    boolean, duration, integer, size, string, type_error, valid_name, Fields, NAME_WORDS,
};
use crate::error::{Reporter, SpecError};
use crate::model::*;
use crate::tree::{Node, Val};
use crate::units::PAGE_SIZE;

/// `guest`: the devices of a `[vm.NAME]`, which may name the host file
/// backing them (`host_file`).
pub(super) fn build_swaps(
    rep: &Reporter,
    node: &Node,
    guest: bool,
) -> Result<Vec<SwapDevice>, SpecError> {
    let Val::Array(items) = &node.val else {
        return Err(type_error(
            rep,
            node,
            "swap",
            "an array of tables, one [[swap]] per device",
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, s)| build_swap(rep, i, s, guest))
        .collect()
}

/// `host_file`: the name of the host `[[file]]` a guest's block device
/// is backed by (virtio-blk), with its line; resolved in vm.rs.
fn host_file(
    rep: &Reporter,
    f: &Fields,
    guest: bool,
) -> Result<Option<(String, usize)>, SpecError> {
    let Some(n) = f.get("host_file") else {
        return Ok(None);
    };
    if !guest {
        return Err(rep.at(
            n.at,
            f.path("host_file"),
            "found host_file on the host's own device; expected it only on a guest's ([vm.NAME]) block device",
        ));
    }
    let name = string(rep, n, &f.path("host_file"), "the name of a host [[file]]")?;
    Ok(Some((name.to_string(), rep.line(n.at))))
}

/// `cache`: QEMU's `-drive cache=` mode for the host file (`host_file`)
/// a guest's block device is backed by.
fn host_cache(rep: &Reporter, f: &Fields) -> Result<HostCache, SpecError> {
    let Some(n) = f.get("cache") else {
        return Ok(HostCache::Writeback);
    };
    if f.get("host_file").is_none() {
        return Err(rep.at(
            n.at,
            f.path("cache"),
            "found cache without host_file; expected it beside host_file, as QEMU's cache mode for that file",
        ));
    }
    let words = "a string: writeback or none (QEMU's cache= modes mmsim models)";
    match string(rep, n, &f.path("cache"), words)? {
        "writeback" => Ok(HostCache::Writeback),
        "none" => Ok(HostCache::None),
        other => Err(rep.at(
            n.at,
            f.path("cache"),
            format!("found {other:?}, expected {words}"),
        )),
    }
}

fn build_swap(rep: &Reporter, i: usize, node: &Node, guest: bool) -> Result<SwapDevice, SpecError> {
    let s = Fields::of(
        rep,
        format!("swap[{i}]"),
        node,
        "a table such as { device = \"zram\", size = \"512M\" }",
    )?;
    for (key, what) in ZRAM_UNMODELLED {
        if let Some(n) = s.get(key) {
            return Err(rep.at(
                n.at,
                s.path(key),
                format!("found {key}, a zram setting mmsim does not model ({what}); expected none of {}", ZRAM_UNMODELLED.iter().map(|k| k.0).collect::<Vec<_>>().join(", ")),
            ));
        }
    }
    s.only(
        &[
            "device",
            "size",
            "priority",
            "rotational",
            "read_latency",
            "write_latency",
            "compressor",
            "mem_limit",
            "host_file",
            "cache",
        ],
        "[[swap]]",
    )?;
    let backing = host_file(rep, &s, guest)?;
    let host_cache = host_cache(rep, &s)?;
    let words = "a string: one of zram, nvme, virtio, hdd";
    let dev = s.require("device", words)?;
    let kind = match string(rep, dev, &s.path("device"), words)? {
        "zram" => SwapKind::Zram,
        "nvme" => SwapKind::Nvme,
        "virtio" => SwapKind::Virtio,
        "hdd" => SwapKind::Hdd,
        "ram" => {
            return Err(rep.at(
                dev.at,
                s.path("device"),
                "found \"ram\", a RAM disk (brd), which mmsim models only as a [[disk]] holding files; expected one of zram, nvme, virtio, hdd (zram is the RAM-backed swap device)",
            ));
        }
        other => {
            return Err(rep.at(
                dev.at,
                s.path("device"),
                format!("found \"{other}\", expected one of zram, nvme, virtio, hdd"),
            ));
        }
    };
    let sz = s.require(
        "size",
        "a size such as \"512M\" (a whole number of 4 KiB pages, at least 8K)",
    )?;
    let size = size(rep, sz, &s.path("size"))?;
    if size < 2 * PAGE_SIZE || !size.is_multiple_of(PAGE_SIZE) {
        return Err(rep.at(
            sz.at,
            s.path("size"),
            format!("found {size} bytes, expected a whole number of 4 KiB pages, at least 8K"),
        ));
    }
    let priority = match s.get("priority") {
        None => None,
        Some(p) => Some(integer(
            rep,
            p,
            &s.path("priority"),
            0,
            32767,
            "an integer from 0 to 32767 (swapon -p; leave it out for the kernel's decreasing negative default)",
        )? as i32),
    };
    let rotational = match s.get("rotational") {
        None => None,
        Some(r) if kind == SwapKind::Zram => {
            return Err(rep.at(
                r.at,
                s.path("rotational"),
                "found rotational on a zram device, which is always non-rotational; expected no rotational key",
            ))
        }
        Some(r) => Some(boolean(rep, r, &s.path("rotational"))?),
    };
    let latency = |key: &str| -> Result<Option<u64>, SpecError> {
        let Some(n) = s.get(key) else {
            return Ok(None);
        };
        if kind == SwapKind::Zram {
            return Err(rep.at(
                n.at,
                s.path(key),
                format!("found {key} on a zram device, which has no device model; expected it only on nvme, virtio or hdd"),
            ));
        }
        duration(rep, n, &s.path(key)).map(Some)
    };
    let read_latency = latency("read_latency")?;
    let write_latency = latency("write_latency")?;
    let compressor = match s.get("compressor") {
        None => None,
        Some(n) if kind != SwapKind::Zram => {
            return Err(rep.at(
                n.at,
                s.path("compressor"),
                "found compressor on a device that stores pages as they are; expected it only on device = \"zram\"",
            ))
        }
        Some(n) => {
            let words = "a string: one of lzo-rle, lzo, lz4, lz4hc, zstd, deflate, 842 (zram's comp_algorithm)";
            let c = string(rep, n, &s.path("compressor"), words)?;
            if !ZRAM_COMPRESSORS.contains(&c) {
                return Err(rep.at(n.at, s.path("compressor"), format!("found {c:?}, expected {words}")));
            }
            Some(c.to_string())
        }
    };
    let mem_limit = match s.get("mem_limit") {
        None => None,
        Some(n) if kind != SwapKind::Zram => {
            return Err(rep.at(
                n.at,
                s.path("mem_limit"),
                "found mem_limit on a device that does not hold pages in memory; expected it only on device = \"zram\"",
            ))
        }
        Some(n) => match super::fields::size(rep, n, &s.path("mem_limit"))? {
            0 => None,
            b => Some(b.div_ceil(PAGE_SIZE)),
        },
    };
    Ok(SwapDevice {
        compressor,
        mem_limit,
        kind,
        size,
        priority,
        rotational,
        read_latency,
        write_latency,
        size_line: rep.line(sz.at),
        host_file: backing,
        host_cache,
    })
}

/// zram's sysfs settings a [[swap]] table may not take, and why.
const ZRAM_UNMODELLED: &[(&str, &str)] = &[
    (
        "recomp_algorithm",
        "recompression of stored pages with a second compressor",
    ),
    (
        "recompress",
        "recompression of stored pages with a second compressor",
    ),
    (
        "backing_dev",
        "writeback of stored pages to a backing device",
    ),
    ("writeback", "writeback of stored pages to a backing device"),
    (
        "writeback_limit",
        "writeback of stored pages to a backing device",
    ),
    ("compact", "compaction of zsmalloc's pool"),
    (
        "algorithm_params",
        "compressor parameters (levels, dictionaries)",
    ),
];

/// The compressors zram's comp_algorithm accepts (those the kernel's
/// crypto API offers it).
pub const ZRAM_COMPRESSORS: &[&str] = &["lzo-rle", "lzo", "lz4", "lz4hc", "zstd", "deflate", "842"];

/// Why a 5.10 spec may not ask for shmem THP.
pub(super) const NO_SHMEM_THP_5_10: &str = "found shmem THP asked for with machine.kernel = \"5.10\": mmsim models 6.1's shmem THP, and 5.10's differs on what the fidelity suite measures (the oracle's 5.10 runs end with none of the huge pages they allocated and fault twice as often); expected \"never\" on 5.10, or machine.kernel = \"6.1\" or later";

pub(super) fn build_files(
    rep: &Reporter,
    node: &Node,
    disks: &[Disk],
    preset: Preset,
) -> Result<Vec<File>, SpecError> {
    let Val::Array(items) = &node.val else {
        return Err(type_error(
            rep,
            node,
            "file",
            "an array of tables, one [[file]] per file",
        ));
    };
    let mut files: Vec<File> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let f = Fields::of(
            rep,
            format!("file[{i}]"),
            item,
            "a table such as { name = \"data\", size = \"1G\", on = \"tmpfs\" }",
        )?;
        f.only(&["name", "size", "on", "huge"], "[[file]]")?;
        let n = f.require("name", NAME_WORDS)?;
        let name = string(rep, n, &f.path("name"), NAME_WORDS)?;
        if !valid_name(name) {
            return Err(type_error(rep, n, &f.path("name"), NAME_WORDS));
        }
        if files.iter().any(|x| x.name == name) {
            return Err(rep.at(n.at, f.path("name"), format!("found \"{name}\", which an earlier [[file]] already names; expected a new name")));
        }
        let sz = f.require(
            "size",
            "a size such as \"1G\" (a whole number of 4 KiB pages)",
        )?;
        let size = size(rep, sz, &f.path("size"))?;
        if size == 0 || !size.is_multiple_of(PAGE_SIZE) {
            return Err(rep.at(
                sz.at,
                f.path("size"),
                format!("found {size} bytes, expected a whole number of 4 KiB pages, at least one"),
            ));
        }
        let mut names = vec!["\"tmpfs\"".to_string()];
        names.extend(disks.iter().map(|d| format!("\"{}\"", d.name)));
        let on_words = format!(
            "a string: \"tmpfs\" or the name of a [[disk]] ({})",
            names.join(", ")
        );
        let on_node = f.require("on", &on_words)?;
        let on = match string(rep, on_node, &f.path("on"), &on_words)? {
            "tmpfs" => FileOn::Tmpfs,
            other => match disks.iter().position(|d| d.name == other) {
                Some(d) => FileOn::Disk(d),
                None => {
                    return Err(rep.at(
                        on_node.at,
                        f.path("on"),
                        format!("found \"{other}\", expected {on_words}"),
                    ))
                }
            },
        };
        if let (FileOn::Disk(d), Some(h)) = (on, f.get("huge")) {
            return Err(rep.at(
                h.at,
                f.path("huge"),
                format!(
                    "found huge on a file on disk \"{}\", expected it only on tmpfs files (the tmpfs mount option)",
                    disks[d].name
                ),
            ));
        }
        if let FileOn::Disk(d) = on {
            let used: u64 = files
                .iter()
                .filter(|x| x.on == on)
                .map(|x| x.size)
                .sum::<u64>()
                + size;
            let room = fs_room(disks[d].fs, disks[d].size);
            if used > room {
                let mib = disks[d].size >> 20;
                let why = match disks[d].fs {
                    Fs::Ext2 => format!("ext2 on its {mib} MiB keeps 5% for root and about 2% for inode tables, block bitmaps and indirect blocks"),
                    Fs::Xfs => format!("XFS on its {mib} MiB keeps a 64 MiB log (size/2048 above 128 GiB), a reserve pool of 5% up to 32 MiB and about 1% for allocation-group headers and btree reservations"),
                };
                return Err(rep.at(
                    sz.at,
                    f.path("size"),
                    format!(
                        "found {} MiB of files on disk \"{}\", expected at most {} MiB: {why}",
                        used >> 20,
                        disks[d].name,
                        room >> 20,
                    ),
                ));
            }
        }
        let mut huge = TmpfsHuge::Never;
        if let Some(h) = f.get("huge") {
            let words: Vec<String> = TmpfsHuge::ALL
                .iter()
                .map(|w| format!("\"{}\"", w.name()))
                .collect();
            let expected = format!("one of {} (tmpfs's huge= mount option)", words.join(", "));
            let v = string(rep, h, &f.path("huge"), &expected)?;
            huge = match TmpfsHuge::ALL.iter().find(|w| w.name() == v) {
                Some(&w) => w,
                None => {
                    return Err(rep.at(
                        h.at,
                        f.path("huge"),
                        format!("found \"{v}\", expected {expected}"),
                    ))
                }
            };
            if huge != TmpfsHuge::Never && preset < Preset::V6_1 {
                return Err(rep.at(h.at, f.path("huge"), NO_SHMEM_THP_5_10.to_string()));
            }
        }
        files.push(File {
            name: name.to_string(),
            size,
            on,
            huge,
            size_line: rep.line(sz.at),
        });
    }
    Ok(files)
}

/// What files an ext2 file system on a disk of `size` bytes can hold
/// (4 KiB blocks): mke2fs reserves 5% for root, and inode tables (256 B
/// per 16 KiB), bitmaps and indirect blocks take about 2% more.
pub fn disk_room(size: u64) -> u64 {
    (size / 100 * 93) & !(PAGE_SIZE - 1)
}

/// The smallest XFS file system mkfs.xfs makes: xfsprogs 5.19 and later
/// refuse smaller ones ("Filesystem must be larger than 300MB"). Measured
/// in the oracle's 6.1 guest with Debian 12's xfsprogs 6.1.0: `-d
/// size=314572800` (300 MiB) is accepted, one page less refused.
pub const XFS_MIN_SIZE: u64 = 300 << 20;

/// What files an XFS file system on a disk of `size` bytes can hold, as
/// mkfs.xfs 6.1 makes it (`-b size=4096`, its defaults otherwise): its
/// internal log takes max(size/2048, 64 MiB), the reserve pool
/// min(size/20, 32 MiB) (xfs_default_resblks), and allocation-group
/// headers, free-space and inode btrees and the per-AG reservations of the
/// refcount and free-inode btrees about 0.7% of the rest; 1% is kept for
/// those and the files' own extent maps. Measured in the oracle's 6.1
/// guest (statfs f_bavail right after mount): 300 MiB leaves 219.1 MiB
/// (this rule: 218), 1 GiB 921.0 MiB (917.7), 4 GiB 3971.6 MiB (3959.0),
/// 16 GiB 16173.9 MiB (16124.2); 218 MiB of files on a 300 MiB disk were
/// written whole.
pub fn xfs_room(size: u64) -> u64 {
    let log = (size / 2048).max(64 << 20);
    let reserve = (size / 20).min(32 << 20);
    size.saturating_sub(log + reserve + size / 100) & !(PAGE_SIZE - 1)
}

/// What files a disk of `size` bytes with file system `fs` can hold.
pub fn fs_room(fs: Fs, size: u64) -> u64 {
    match fs {
        Fs::Ext2 => disk_room(size),
        Fs::Xfs => xfs_room(size),
    }
}

pub(super) fn build_disks(
    rep: &Reporter,
    node: &Node,
    guest: bool,
) -> Result<Vec<Disk>, SpecError> {
    let Val::Array(items) = &node.val else {
        return Err(type_error(
            rep,
            node,
            "disk",
            "an array of tables, one [[disk]] per disk",
        ));
    };
    let mut disks: Vec<Disk> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let d = Fields::of(
            rep,
            format!("disk[{i}]"),
            item,
            "a table such as { name = \"data\", device = \"virtio\", size = \"1G\" }",
        )?;
        d.only(
            &[
                "name",
                "device",
                "size",
                "read_ahead_kb",
                "fs",
                "host_file",
                "cache",
            ],
            "[[disk]]",
        )?;
        let backing = host_file(rep, &d, guest)?;
        let host_cache = host_cache(rep, &d)?;
        let n = d.require("name", NAME_WORDS)?;
        let name = string(rep, n, &d.path("name"), NAME_WORDS)?;
        if !valid_name(name) {
            return Err(type_error(rep, n, &d.path("name"), NAME_WORDS));
        }
        if name == "tmpfs" || disks.iter().any(|x| x.name == name) {
            return Err(rep.at(
                n.at,
                d.path("name"),
                format!("found \"{name}\", which is taken (tmpfs, or an earlier [[disk]]); expected a new name"),
            ));
        }
        let words = "a string: one of nvme, virtio, hdd, ram";
        let dev = d.require("device", words)?;
        let kind = match string(rep, dev, &d.path("device"), words)? {
            "nvme" => SwapKind::Nvme,
            "virtio" => SwapKind::Virtio,
            "hdd" => SwapKind::Hdd,
            "ram" => SwapKind::Ram,
            other => {
                return Err(rep.at(
                    dev.at,
                    d.path("device"),
                    format!("found \"{other}\", expected one of nvme, virtio, hdd, ram (zram holds no file system here)"),
                ))
            }
        };
        let sz = d.require("size", "a size such as \"1G\" (at least 16M)")?;
        let size = size(rep, sz, &d.path("size"))?;
        if size < 16 << 20 || !size.is_multiple_of(PAGE_SIZE) {
            return Err(rep.at(
                sz.at,
                d.path("size"),
                format!("found {size} bytes, expected a whole number of 4 KiB pages, at least 16M"),
            ));
        }
        let read_ahead_kb = match d.get("read_ahead_kb") {
            None => 128,
            Some(r) => integer(
                rep,
                r,
                &d.path("read_ahead_kb"),
                0,
                65536,
                "an integer from 0 to 65536, a multiple of 4 (KiB; 0 turns readahead off)",
            )? as u64,
        };
        if !read_ahead_kb.is_multiple_of(4) {
            return Err(rep.at(
                d.get("read_ahead_kb").expect("given").at,
                d.path("read_ahead_kb"),
                format!("found {read_ahead_kb}, expected a multiple of 4 (whole pages)"),
            ));
        }
        let fs_words = "a string: ext2 or xfs";
        let fs = match d.get("fs") {
            None => Fs::Ext2,
            Some(v) => match string(rep, v, &d.path("fs"), fs_words)? {
                "ext2" => Fs::Ext2,
                "xfs" => Fs::Xfs,
                other => {
                    return Err(rep.at(
                        v.at,
                        d.path("fs"),
                        format!("found \"{other}\", expected {fs_words}"),
                    ))
                }
            },
        };
        if fs == Fs::Xfs && size < XFS_MIN_SIZE {
            return Err(rep.at(
                sz.at,
                d.path("size"),
                format!(
                    "found {size} bytes ({} MiB) on an xfs disk, expected at least 300M: mkfs.xfs refuses file systems smaller than 300 MiB",
                    size >> 20
                ),
            ));
        }
        disks.push(Disk {
            name: name.to_string(),
            kind,
            size,
            read_ahead_kb,
            fs,
            host_file: backing,
            host_cache,
        });
    }
    Ok(disks)
}
