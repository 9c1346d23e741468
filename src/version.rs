//! Version string with the build id, as the scx tools print it.

pub fn full() -> &'static str {
    static V: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        format!(
            "{} build {}",
            scx_utils::build_id::full_version(env!("CARGO_PKG_VERSION")),
            env!("GMP_BUILD_ID")
        )
    })
}
