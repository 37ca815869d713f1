// No build step: a build script gives the crate its OUT_DIR, the directory under target/
// (wherever CARGO_TARGET_DIR puts it) where the derived test files are kept.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
