//! The task and cgroup storage maps, kept open across hotplug restarts and handed to the next
//! load, so that a restart never frees them.
//!
//! Why: the kernel frees a task or cgroup storage map in a worker that disables migration and
//! then waits for an RCU tasks-trace grace period (bpf_map_free -> bpf_local_storage_map_free
//! -> rcu_barrier_tasks_trace). If that worker sits on a CPU that is going offline, the offline
//! waits for it to leave its migration-disabled section, while the grace period waits for
//! cpus_read_lock, which the offline holds: the machine's CPU hotplug deadlocks (seen on 6.16
//! and 6.18 in the F3b test, where every hotplug event restarts the scheduler). Restarts are
//! exactly when CPUs are coming and going, so the maps outlive them and are freed once, when
//! scx_gmp exits.
//!
//! The next load's ops.init_task and ops.cgroup_init overwrite every field of the entries they
//! find, so nothing from the previous load leaks into the new one.

use crate::bpf_skel::{BpfSkel, OpenBpfSkel};
use anyhow::{Context, Result};
use std::os::fd::{AsFd, OwnedFd};

pub struct KeptStorage {
    task: OwnedFd,
    cgrp: OwnedFd,
}

impl KeptStorage {
    /// Duplicates the loaded scheduler's storage map fds.
    pub fn take(skel: &BpfSkel) -> Result<Self> {
        Ok(Self {
            task: skel
                .maps
                .task_ctx_stor
                .as_fd()
                .try_clone_to_owned()
                .context("failed to keep the task storage map")?,
            cgrp: skel
                .maps
                .cgrp_ctx_stor
                .as_fd()
                .try_clone_to_owned()
                .context("failed to keep the cgroup storage map")?,
        })
    }

    /// Makes the opened (not yet loaded) scheduler use the kept maps instead of new ones.
    pub fn reuse(&self, skel: &mut OpenBpfSkel) -> Result<()> {
        skel.maps
            .task_ctx_stor
            .reuse_fd(self.task.as_fd())
            .context("failed to reuse the task storage map")?;
        skel.maps
            .cgrp_ctx_stor
            .reuse_fd(self.cgrp.as_fd())
            .context("failed to reuse the cgroup storage map")?;
        Ok(())
    }
}
