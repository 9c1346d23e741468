//! Attach the scheduler from a SCHED_FIFO thread.
//!
//! While the kernel enables a BPF scheduler it moves every task, the attaching thread
//! included, from the fair class to the ext class, in the attaching thread's own context.
//! Once that thread is ext and fair tasks not yet moved keep its CPU busy, it never runs
//! again (fair outranks ext): the enable stops halfway and the machine hangs, with ext
//! kthreads such as RCU's grace-period thread starved too. Two F3 hangs on 6.16 here (a
//! reload under `stress-ng -c 4`) had that signature: the loader stuck in attach, sched_ext
//! "disabling+all", RCU's kthread runnable in ext for 20 s beside a fair hog. Kernels with
//! upstream commit b06ccbabe250 ("sched_ext: Fix starvation of scx_enable() under fair-class
//! saturation") do the enable on an RT kthread; on older ones (Debian's 6.16 and 6.18 here)
//! the loader gets the same protection by being real-time itself for the duration of the
//! attach: RT tasks stay in the RT class. Where real-time is forbidden (a service sandbox)
//! the attach goes on as an ordinary thread, with one warning saying why.

use log::warn;
use nix::libc;

/// Holds the calling thread at SCHED_FIFO until dropped, then restores its policy.
pub struct RtGuard {
    policy: libc::c_int,
    param: libc::sched_param,
    raised: bool,
}

impl RtGuard {
    /// Never fails: without the privilege the attach goes on as before, with a warning.
    pub fn raise() -> Self {
        // SAFETY: pid 0 is the calling thread; param is a valid out-parameter.
        let mut param = libc::sched_param { sched_priority: 0 };
        let policy = unsafe { libc::sched_getscheduler(0) };
        let got = unsafe { libc::sched_getparam(0, &mut param) };
        let mut guard = Self {
            policy,
            param,
            raised: false,
        };
        if policy < 0 || got != 0 {
            warn!("could not read the loader's scheduling policy; attaching without SCHED_FIFO");
            return guard;
        }
        let fifo = libc::sched_param { sched_priority: 1 };
        // SAFETY: as above; fifo is a valid sched_param.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } != 0 {
            warn!("{}", refused(&std::io::Error::last_os_error()));
            return guard;
        }
        guard.raised = true;
        guard
    }
}

/// The one line said when SCHED_FIFO is refused; the attach then goes on as an ordinary
/// thread. EPERM is what a service sandbox that forbids real-time scheduling (systemd's
/// RestrictRealtime=) or a missing CAP_SYS_NICE returns.
fn refused(err: &std::io::Error) -> String {
    let why = if err.raw_os_error() == Some(libc::EPERM) {
        "real-time scheduling is forbidden here (a unit with RestrictRealtime=, or no \
         CAP_SYS_NICE)"
    } else {
        "sched_setscheduler failed"
    };
    format!(
        "attaching without SCHED_FIFO: {why} ({err}); on kernels without the enable \
         starvation fix a CPU-saturated machine can stall while scx_gmp enables"
    )
}

impl Drop for RtGuard {
    fn drop(&mut self) {
        if !self.raised {
            return;
        }
        // SAFETY: restores the policy and parameters read in raise().
        if unsafe { libc::sched_setscheduler(0, self.policy, &self.param) } != 0 {
            warn!(
                "could not restore the loader's scheduling policy after attaching: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> libc::c_int {
        // SAFETY: pid 0 is the calling thread.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn raises_to_fifo_and_restores() {
        let before = policy();
        {
            let g = RtGuard::raise();
            // Unprivileged runs cannot raise; the guard must then leave the policy alone.
            let want = if g.raised { libc::SCHED_FIFO } else { before };
            assert_eq!(policy(), want);
        }
        assert_eq!(policy(), before);
    }

    #[test]
    fn a_refusal_is_one_line_naming_the_sandbox() {
        let line = refused(&std::io::Error::from_raw_os_error(libc::EPERM));
        assert!(!line.contains('\n'));
        assert!(line.contains("RestrictRealtime="), "{line}");
        let other = refused(&std::io::Error::from_raw_os_error(libc::EINVAL));
        assert!(!other.contains("RestrictRealtime="), "{other}");
    }
}
