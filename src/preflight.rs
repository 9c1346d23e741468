//! Checks made before anything is loaded, each failing with one clear message: root, a
//! kernel with sched_ext and nothing else loaded, and the kernel features scx_gmp cannot do
//! without (named with the release that brought them).

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

/// The oldest kernel with every feature below; the README states the same.
pub const MIN_KERNEL: &str = "6.16";

/// Where the kernel publishes its own BTF, which struct_ops and every check below need.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// How a feature shows in the running kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// A kfunc, under any of these BTF names (6.19 renamed some to take an argument struct).
    Kfunc(&'static [&'static str]),
    /// A value of `enum scx_ops_flags`.
    OpsFlag(&'static str),
    /// A file that exists only when a config option is built in.
    Path(&'static str),
}

/// A kernel feature scx_gmp needs and has no cheap fallback for. Where a fallback is cheap
/// the scx headers' compat wrappers already take it (scx_bpf_now() before 6.14,
/// scx_bpf_task_set_slice() before 6.19, the 6.13 dispatch renames).
#[derive(Debug, Clone, Copy)]
pub struct Feature {
    pub name: &'static str,
    pub since: &'static str,
    pub probe: Probe,
}

pub const FEATURES: [Feature; 3] = [
    // Placement asks for an idle CPU among the procs AND the task's cpumask in one call.
    Feature {
        name: "scx_bpf_select_cpu_and()",
        since: "6.16",
        probe: Probe::Kfunc(&["scx_bpf_select_cpu_and", "__scx_bpf_select_cpu_and"]),
    },
    // One idle mask per node: NUMA-local idle picks without a machine-wide scan.
    Feature {
        name: "per-node idle tracking (SCX_OPS_BUILTIN_IDLE_PER_NODE)",
        since: "6.15",
        probe: Probe::OpsFlag("SCX_OPS_BUILTIN_IDLE_PER_NODE"),
    },
    // scx_utils attaches a probe program to the kernel's struct_ops registration.
    Feature {
        name: "CONFIG_FUNCTION_TRACER",
        since: "any release, when built in",
        probe: Probe::Path("/proc/sys/kernel/ftrace_enabled"),
    },
];

/// What the running kernel has; a trait so that tests can fake a kernel.
pub trait Kernel {
    fn release(&self) -> String;
    fn has(&self, probe: Probe) -> bool;
}

/// The running kernel, read through its BTF.
pub struct Running;

impl Kernel for Running {
    fn release(&self) -> String {
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|r| r.trim().to_string())
            .unwrap_or_else(|_| "unknown release".into())
    }

    fn has(&self, probe: Probe) -> bool {
        use scx_utils::compat;
        match probe {
            Probe::Kfunc(names) => names
                .iter()
                .any(|n| compat::ksym_exists(n).unwrap_or(false)),
            Probe::OpsFlag(flag) => compat::read_enum("scx_ops_flags", flag).is_ok(),
            Probe::Path(p) => Path::new(p).exists(),
        }
    }
}

/// Fail, in one line naming the release and every missing feature, unless `kernel` has all
/// of FEATURES.
pub fn check_features(kernel: &dyn Kernel) -> Result<()> {
    let missing: Vec<String> = FEATURES
        .iter()
        .filter(|f| !kernel.has(f.probe))
        .map(|f| format!("{} ({})", f.name, f.since))
        .collect();
    if !missing.is_empty() {
        bail!(
            "this kernel ({}) lacks what scx_gmp needs (Linux {MIN_KERNEL} or newer with \
             sched_ext): {}",
            kernel.release(),
            missing.join(", ")
        );
    }
    Ok(())
}

/// Fail unless the kernel publishes its BTF (CONFIG_DEBUG_INFO_BTF); without it nothing
/// below can be checked and no struct_ops scheduler loads.
pub fn check_btf(path: &Path) -> Result<()> {
    if !path.exists() {
        bail!(
            "this kernel has no BTF ({} is absent): it needs CONFIG_DEBUG_INFO_BTF=y",
            path.display()
        );
    }
    Ok(())
}

pub fn check_all() -> Result<()> {
    check_root()?;
    check_kernel(Path::new(SCX_SYSFS))?;
    check_btf(Path::new(VMLINUX_BTF))?;
    check_features(&Running)
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

    /// A kernel of the given release that has every feature but those named.
    struct Fake {
        release: &'static str,
        lacks: Vec<Probe>,
    }

    impl Kernel for Fake {
        fn release(&self) -> String {
            self.release.into()
        }
        fn has(&self, probe: Probe) -> bool {
            !self.lacks.contains(&probe)
        }
    }

    #[test]
    fn a_complete_kernel_passes() {
        let k = Fake {
            release: "6.18.15",
            lacks: vec![],
        };
        assert!(check_features(&k).is_ok());
    }

    #[test]
    fn an_old_kernel_gets_one_line_naming_each_missing_feature() {
        // 6.15: per-node idle tracking but no scx_bpf_select_cpu_and().
        let k = Fake {
            release: "6.15.4-fake",
            lacks: vec![FEATURES[0].probe],
        };
        let e = check_features(&k).unwrap_err().to_string();
        assert_eq!(
            e,
            "this kernel (6.15.4-fake) lacks what scx_gmp needs (Linux 6.16 or newer with \
             sched_ext): scx_bpf_select_cpu_and() (6.16)"
        );
        // 6.14 without ftrace: all three, in one line.
        let k = Fake {
            release: "6.14.0",
            lacks: FEATURES.iter().map(|f| f.probe).collect(),
        };
        let e = check_features(&k).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        for f in FEATURES {
            assert!(e.contains(f.name), "{e}");
        }
        assert!(e.contains("(6.14.0)"), "{e}");
    }

    #[test]
    fn no_btf_names_the_config() {
        let d = fake(None, None);
        let e = check_btf(&d.join("vmlinux")).unwrap_err().to_string();
        assert!(e.contains("CONFIG_DEBUG_INFO_BTF"), "{e}");
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
