//! Checks made before anything is loaded, each failing with one clear message.

use anyhow::{bail, Result};
use std::path::Path;

/// Where sched_ext publishes its state.
pub const SCX_SYSFS: &str = "/sys/kernel/sched_ext";

/// The name of the loaded sched_ext scheduler, if any, read from `root`'s sysfs folder.
pub fn loaded_scheduler(sysfs: &Path) -> Option<String> {
    let state = std::fs::read_to_string(sysfs.join("state")).ok()?;
    if state.trim() == "disabled" {
        return None;
    }
    let ops = std::fs::read_to_string(sysfs.join("root/ops"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    Some(if ops.is_empty() {
        format!("unknown (sched_ext state is {})", state.trim())
    } else {
        ops
    })
}

/// Fail unless the kernel has sched_ext and no other scheduler is loaded.
pub fn check_kernel(sysfs: &Path) -> Result<()> {
    if !sysfs.join("state").exists() {
        bail!(
            "this kernel has no sched_ext ({} is absent): it needs CONFIG_SCHED_CLASS_EXT=y",
            sysfs.display()
        );
    }
    if let Some(name) = loaded_scheduler(sysfs) {
        bail!("another sched_ext scheduler is already loaded: {name}");
    }
    Ok(())
}

/// Fail unless running as root (loading BPF schedulers needs CAP_SYS_ADMIN and CAP_BPF).
pub fn check_root() -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("must run as root: loading a BPF scheduler needs CAP_SYS_ADMIN");
    }
    Ok(())
}

/// Where the kernel names the clocksource in use.
pub const CLOCKSOURCE: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";

/// A warning when the clocksource is one whose every read is slow (an I/O or MMIO access, not
/// a CPU register): the scheduler reads the clock a few times per context switch. Guests
/// whose kernel marks the TSC unstable fall back to these (the benchmark VM did, see
/// scripts/vm.sh --tsc).
pub fn slow_clock(path: &Path) -> Option<String> {
    let name = std::fs::read_to_string(path).ok()?;
    let name = name.trim();
    matches!(
        name,
        "hpet" | "acpi_pm" | "jiffies" | "refined-jiffies" | "pit"
    )
    .then(|| {
        format!(
            "the clocksource is {name}: each clock read is an I/O access, and scx_gmp reads the \
             clock a few times per context switch (a TSC clocksource avoids this)"
        )
    })
}

pub fn check_all() -> Result<()> {
    check_root()?;
    check_kernel(Path::new(SCX_SYSFS))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs folder in the temp dir, removed when dropped (tests leave nothing behind).
    struct FakeSysfs(std::path::PathBuf);

    impl Drop for FakeSysfs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    impl std::ops::Deref for FakeSysfs {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    fn fake(state: Option<&str>, ops: Option<&str>) -> FakeSysfs {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "gmp-preflight-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(dir.join("root")).unwrap();
        let d = FakeSysfs(dir);
        if let Some(s) = state {
            std::fs::write(d.join("state"), s).unwrap();
        }
        if let Some(o) = ops {
            std::fs::write(d.join("root/ops"), o).unwrap();
        }
        d
    }

    #[test]
    fn no_sched_ext_names_the_config() {
        let d = fake(None, None);
        let e = check_kernel(&d).unwrap_err().to_string();
        assert!(e.contains("CONFIG_SCHED_CLASS_EXT"), "{e}");
    }

    #[test]
    fn disabled_is_fine() {
        let d = fake(Some("disabled\n"), None);
        assert!(check_kernel(&d).is_ok());
    }

    #[test]
    fn loaded_scheduler_is_named() {
        let d = fake(Some("enabled\n"), Some("bpfland_1.0.0\n"));
        let e = check_kernel(&d).unwrap_err().to_string();
        assert!(e.contains("bpfland_1.0.0"), "{e}");
    }

    #[test]
    fn slow_clocksources_are_named_fast_ones_pass() {
        let d = fake(None, None);
        let f = d.join("current_clocksource");
        std::fs::write(&f, "hpet\n").unwrap();
        assert!(slow_clock(&f).unwrap().contains("hpet"));
        std::fs::write(&f, "tsc\n").unwrap();
        assert_eq!(slow_clock(&f), None);
        std::fs::write(&f, "kvm-clock\n").unwrap();
        assert_eq!(slow_clock(&f), None);
        assert_eq!(slow_clock(&d.join("absent")), None);
    }

    #[test]
    fn transitional_state_counts_as_loaded() {
        let d = fake(Some("enabling\n"), None);
        assert!(check_kernel(&d)
            .unwrap_err()
            .to_string()
            .contains("enabling"));
    }
}
