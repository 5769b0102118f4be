//! The processes a test started, as the kernel lists them.

use std::collections::HashMap;

/// The processes below `root` (children, their children, ...).
pub fn members(root: u32) -> Vec<u32> {
    let mut parent = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The parent id is the second field after the command name in parentheses.
        let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
            parent.insert(pid, ppid);
        }
    }
    let below = |mut pid: u32| {
        while let Some(&p) = parent.get(&pid) {
            if p == root {
                return true;
            }
            pid = p;
        }
        false
    };
    parent.keys().copied().filter(|&p| below(p)).collect()
}

/// How many processes are below `root`, and the resident memory of them and `root`, in KiB.
pub fn footprint(root: u32) -> (usize, u64) {
    let rss = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            })
            .unwrap_or(0)
    };
    let members = members(root);
    let memory = members.iter().map(|&p| rss(p)).sum::<u64>() + rss(root);
    (members.len(), memory)
}

/// Kills `pid` at once (SIGKILL).
pub fn kill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status();
}
