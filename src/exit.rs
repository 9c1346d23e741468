//! How a load ends: detach, wait until sched_ext has finished the teardown (so a reload does
//! not race it), tell the user when the kernel ejected the scheduler, and return the exit
//! record that says whether to restart.

use crate::bpf_skel::BpfSkel;
use anyhow::Result;
use scx_utils::{uei_report, ScxExitKind as Kind, UserExitInfo};
use std::time::{Duration, Instant};

/// How long to wait for sched_ext to report `disabled` after the detach.
const TEARDOWN_WAIT: Duration = Duration::from_secs(5);

/// How the kernel names an exit kind (enum scx_exit_kind, values from scx_utils).
pub fn exit_kind_name(kind: i32) -> &'static str {
    const NAMES: [(i32, &str); 9] = [
        (Kind::None as i32, "none"),
        (Kind::Done as i32, "done"),
        (Kind::Unreg as i32, "unregistered by user space"),
        (Kind::UnregBPF as i32, "unregistered by the BPF scheduler"),
        (Kind::UnregKern as i32, "unregistered by the kernel"),
        (Kind::SysRq as i32, "SysRq-S"),
        (Kind::Error as i32, "runtime error"),
        (Kind::ErrorBPF as i32, "scx_bpf_error"),
        (Kind::ErrorStall as i32, "watchdog stall"),
    ];
    NAMES
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or("unknown", |(_, n)| n)
}

/// An exit the user did not ask for: an error (kinds from SCX_EXIT_ERROR on) or SysRq-S.
fn ejected(kind: i32) -> bool {
    kind >= Kind::Error as i32 || kind == Kind::SysRq as i32
}

/// Detach (dropping the link unloads the scheduler), wait for the teardown, and report.
pub fn finish(skel: &BpfSkel, link: Option<libbpf_rs::Link>) -> Result<UserExitInfo> {
    drop(link);
    wait_disabled(TEARDOWN_WAIT);
    let kind = skel.maps.data_data.as_ref().map_or(0, |d| d.uei.kind);
    if ejected(kind) {
        eprintln!(
            "scx_gmp: the kernel unloaded the scheduler: exit kind {kind} ({})",
            exit_kind_name(kind)
        );
    }
    uei_report!(skel, uei)
}

/// Wait until sched_ext reports `disabled`, or `limit` passes.
fn wait_disabled(limit: Duration) {
    let t = Instant::now();
    while t.elapsed() < limit {
        match std::fs::read_to_string("/sys/kernel/sched_ext/state") {
            Ok(s) if s.trim() != "disabled" => std::thread::sleep(Duration::from_millis(20)),
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_kinds_keep_the_kernels_numbers() {
        assert_eq!(exit_kind_name(1), "done");
        assert_eq!(exit_kind_name(67), "SysRq-S");
        assert_eq!(exit_kind_name(1025), "scx_bpf_error");
        assert_eq!(exit_kind_name(1026), "watchdog stall");
        assert_eq!(exit_kind_name(12345), "unknown");
        assert!(ejected(1026) && ejected(67) && !ejected(64) && !ejected(1));
    }
}
