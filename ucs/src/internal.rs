//! [`internal_mod!`](crate::internal_mod): modules that are internal to a
//! crate but open to its fuzz targets and tests.

/// Declares module `$name` of the invoking crate: public when that crate
/// is built with its `fuzzing` feature or with `--cfg fuzzing` (as
/// cargo-fuzz does), for fuzz targets, decoder tests and benches;
/// private to the crate otherwise, where what only those use is unused.
/// The invoking crate declares the `fuzzing` feature.
#[macro_export]
macro_rules! internal_mod {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[cfg(any(fuzzing, feature = "fuzzing"))]
        pub mod $name;
        $(#[$m])*
        #[cfg(not(any(fuzzing, feature = "fuzzing")))]
        #[allow(unused, unreachable_pub, clippy::wrong_self_convention)]
        pub(crate) mod $name;
    };
}
