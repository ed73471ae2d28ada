//! A task process the OOM killer ended: it sends no report, so the runner
//! writes one for it from what it knows (its name, cgroup and start) and
//! what the kernel logged of the kill ("oom-kill:constraint=…" and
//! "Killed process PID (…) … anon-rss:…").

use crate::exec::Report;
use mmsim_spec::output::{OomKillResult, TaskResult};

/// The report of a task process killed by SIGKILL: no phases (they went
/// with it), its end when its report pipe closed (its exit), the cgroups
/// as the runner reads them then, and the kernel log's record of the kill
/// if there is one for its pid.
pub(crate) fn killed_report(
    pid: libc::pid_t,
    name: String,
    cgroup: String,
    start_ns: u64,
    end_ns: u64,
    cgroups: std::collections::BTreeMap<String, mmsim_spec::output::CgroupResult>,
) -> Report {
    let log = read_kernel_log();
    let kill = parse_kill(&log, pid).unwrap_or(OomKillResult {
        constraint: "unknown".into(),
        oom_memcg: None,
        at_ns: 0,
        anon_rss_kb: None,
        file_rss_kb: None,
        shmem_rss_kb: None,
        pgtables_kb: None,
        oom_score_adj: 0,
    });
    Report {
        task: TaskResult {
            name,
            cgroup,
            start_ns,
            end_ns,
            phases: Vec::new(),
            kv: None,
            oom_kill: Some(OomKillResult {
                at_ns: end_ns,
                ..kill
            }),
        },
        pages_checked: 0,
        violations: 0,
        cgroups,
        zram: Vec::new(),
        zswap: None,
        error: None,
        forks: Vec::new(),
    }
}

/// The kernel's log buffer (syslog(2) SYSLOG_ACTION_READ_ALL; needs
/// CAP_SYSLOG, which the runner has as root). Empty if unreadable.
fn read_kernel_log() -> String {
    const SYSLOG_ACTION_READ_ALL: libc::c_int = 3;
    const SYSLOG_ACTION_SIZE_BUFFER: libc::c_int = 10;
    // SAFETY: SIZE_BUFFER takes no buffer.
    let size = unsafe { libc::klogctl(SYSLOG_ACTION_SIZE_BUFFER, std::ptr::null_mut(), 0) };
    if size <= 0 {
        return String::new();
    }
    let mut buf = vec![0u8; size as usize];
    // SAFETY: buf holds `size` bytes.
    let n = unsafe { libc::klogctl(SYSLOG_ACTION_READ_ALL, buf.as_mut_ptr().cast(), size) };
    buf.truncate(n.max(0) as usize);
    String::from_utf8_lossy(&buf).into_owned()
}

/// The last kill of `pid` in the log `log`: the "Killed process" line
/// gives the counters and whether it was a memcg's OOM ("Memory cgroup
/// out of memory:") or the machine's ("Out of memory:"); the summary line
/// before it names the cgroup at its limit (`oom_memcg=`, the path's last
/// component being the spec's cgroup).
pub(crate) fn parse_kill(log: &str, pid: libc::pid_t) -> Option<OomKillResult> {
    let killed = format!("Killed process {pid} (");
    let mut oom_memcg = None;
    let mut found = None;
    for line in log.lines() {
        if let Some(i) = line.find("oom-kill:constraint=") {
            oom_memcg = field(&line[i..], "oom_memcg=", ',')
                .map(|p| p.rsplit('/').next().unwrap_or(p))
                .map(|p| p.strip_prefix("mmsim-").unwrap_or(p).to_string());
        }
        let Some(i) = line.find(&killed) else {
            continue;
        };
        let memcg = line[..i].contains("Memory cgroup out of memory");
        let rest = &line[i..];
        let kb = |key: &str| field(rest, key, 'k').and_then(|v| v.parse::<u64>().ok());
        found = Some(OomKillResult {
            constraint: if memcg { "memcg" } else { "global" }.into(),
            oom_memcg: if memcg { oom_memcg.clone() } else { None },
            at_ns: 0,
            anon_rss_kb: kb("anon-rss:"),
            file_rss_kb: kb("file-rss:"),
            shmem_rss_kb: kb("shmem-rss:"),
            pgtables_kb: kb("pgtables:"),
            oom_score_adj: field(rest, "oom_score_adj:", ' ')
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
        });
    }
    found
}

/// The text after `key` in `s`, up to `end` (or the end of `s`).
fn field<'a>(s: &'a str, key: &str, end: char) -> Option<&'a str> {
    let i = s.find(key)? + key.len();
    let rest = &s[i..];
    Some(rest.split(end).next().unwrap_or(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What 6.1's dump_oom_summary and __oom_kill_process print (a memcg
    /// OOM, then a global one), with another process's kill between.
    const LOG: &str = "\
<6>[   12.1] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/mmsim-w,task_memcg=/mmsim-w,task=mmsim-runner,pid=140,uid=0
<3>[   12.1] Memory cgroup out of memory: Killed process 140 (mmsim-runner) total-vm:205640kB, anon-rss:196612kB, file-rss:1452kB, shmem-rss:0kB, UID:0 pgtables:436kB oom_score_adj:500
<3>[   13.0] Out of memory: Killed process 150 (mmsim-runner) total-vm:105640kB, anon-rss:96612kB, file-rss:12kB, shmem-rss:4kB, UID:0 pgtables:236kB oom_score_adj:0
";

    #[test]
    fn a_memcg_kill_names_its_cgroup_and_counters() {
        let k = parse_kill(LOG, 140).expect("pid 140 was killed");
        assert_eq!(k.constraint, "memcg");
        assert_eq!(k.oom_memcg.as_deref(), Some("w"));
        assert_eq!(k.anon_rss_kb, Some(196_612));
        assert_eq!(k.file_rss_kb, Some(1452));
        assert_eq!(k.shmem_rss_kb, Some(0));
        assert_eq!(k.pgtables_kb, Some(436));
        assert_eq!(k.oom_score_adj, 500);
    }

    #[test]
    fn a_global_kill_has_no_cgroup() {
        let k = parse_kill(LOG, 150).expect("pid 150 was killed");
        assert_eq!(k.constraint, "global");
        assert_eq!(k.oom_memcg, None);
        assert_eq!(k.shmem_rss_kb, Some(4));
    }

    #[test]
    fn another_pid_is_not_a_kill_of_this_one() {
        assert!(parse_kill(LOG, 14).is_none());
        assert!(parse_kill(LOG, 1400).is_none());
    }
}
