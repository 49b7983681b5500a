//! Gives the shared library UCX's soname, so that programs linked against
//! it look for `libucp.so.0` as they do for UCX's.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libucp.so.0");
    println!("cargo:rerun-if-changed=build.rs");
}
