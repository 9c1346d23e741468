//! `scx_gmp run CMD [ARGS]`: start a command under the SCHED_EXT policy, so that a scheduler
//! loaded with --partial schedules it (Debian 12's chrt predates the policy).

use anyhow::{bail, Context, Result};
use nix::libc;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;

/// The policy number of SCHED_EXT (include/uapi/linux/sched.h).
pub const SCHED_EXT: u32 = 7;

/// struct sched_attr, version 0 (48 bytes), as sched_setattr(2) takes it.
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

/// Switch the calling thread to SCHED_EXT, keeping its nice value. Children inherit it.
pub fn set_sched_ext() -> Result<()> {
    // getpriority returns the nice value; -1 is also a valid nice, so errno tells errors apart.
    nix::errno::Errno::clear();
    let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    let nice = if nix::errno::Errno::last_raw() != 0 {
        0
    } else {
        nice
    };
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: SCHED_EXT,
        sched_nice: nice,
        ..Default::default()
    };
    // SAFETY: attr is a valid, initialised struct sched_attr that outlives the call.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if r != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINVAL) {
            bail!("this kernel has no SCHED_EXT policy (it needs CONFIG_SCHED_CLASS_EXT)");
        }
        return Err(err).context("sched_setattr(SCHED_EXT) failed");
    }
    Ok(())
}

/// Become `command` under SCHED_EXT. Returns only on failure.
pub fn exec(command: &[OsString]) -> Result<()> {
    let Some((prog, args)) = command.split_first() else {
        bail!("run: no command given");
    };
    set_sched_ext()?;
    let err = std::process::Command::new(prog).args(args).exec();
    Err(err).with_context(|| format!("failed to run {}", prog.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_attr_is_the_v0_layout() {
        assert_eq!(std::mem::size_of::<SchedAttr>(), 48);
    }
}
