// Compiles bpf/main.bpf.c (which includes the other bpf/*.bpf.c) into a libbpf-rs skeleton
// and generates the Rust side of bpf/intf.h, with the scx BPF headers taken from the scx_cargo
// crate at build time. The clang to use comes from BPF_CLANG (.cargo/config.toml).
fn main() {
    scx_cargo::BpfBuilder::new()
        .expect("failed to set up the BPF builder (is clang >= 18 installed? see scripts/setup.sh)")
        .enable_intf("bpf/intf.h", "bpf_intf.rs")
        .enable_skel("bpf/main.bpf.c", "bpf")
        .compile_link_gen()
        .expect("failed to build the BPF scheduler");
    println!("cargo:rerun-if-changed=bpf/intf.h");

    // Build id for --version: the commit this was built from (and whether the tree was dirty).
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let id = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(rev) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            format!("{rev}{}", if dirty { "-dirty" } else { "" })
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=GMP_BUILD_ID={id}");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/index");
}
