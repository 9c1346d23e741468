// Compiles bpf/main.bpf.c into a libbpf-rs skeleton, with the scx BPF headers taken from the
// scx_cargo crate at build time. The clang to use comes from BPF_CLANG (.cargo/config.toml).
fn main() {
    scx_cargo::BpfBuilder::new()
        .expect("failed to set up the BPF builder (is clang >= 18 installed? see scripts/setup.sh)")
        .enable_skel("bpf/main.bpf.c", "bpf")
        .compile_link_gen()
        .expect("failed to build the BPF scheduler");
    println!("cargo:rerun-if-changed=bpf/intf.h");
}
