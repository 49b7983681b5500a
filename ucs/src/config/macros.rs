//! The table and enum macros.

/// Declares a component's configuration: a typed struct, its
/// [`ConfigTable`](crate::config::ConfigTable) and loaders.
///
/// ```
/// # use rucx_ucs as ucs;
/// ucs::config_table! {
///     /// TCP transport options.
///     pub struct TcpConfig in TCP_TABLE ("tcp", "TCP_") {
///         /// Set TCP_NODELAY on every socket.
///         NODELAY nodelay: bool = "y",
///         /// Size of the receive buffer of a connection.
///         RX_SEG_SIZE rx_seg_size: ucs::config::MemUnits = "64k",
///     }
/// }
///
/// let cfg = TcpConfig::from_lookup(|var| match var {
///     "RUCX_TCP_NODELAY" => Some("n".to_string()),
///     _ => None,
/// })
/// .unwrap();
/// assert!(!cfg.nodelay);
/// assert_eq!(cfg.rx_seg_size.bytes(), Some(65536));
/// assert_eq!(TCP_TABLE.fields[1].name, "RX_SEG_SIZE");
/// // In the component's unit tests:
/// TCP_TABLE.check_defaults().unwrap();
/// ```
///
/// Syntax: attributes and doc of the struct, then
/// `VIS struct NAME in TABLE ("component", "PREFIX_") { ... }` with one entry
/// per variable: its doc comment (only `///` lines; they become the field's
/// doc and the text `rucx-info -c` prints), the variable name after
/// `RUCX_PREFIX_`, the struct field, its type (a
/// [`ConfigValue`](crate::config::ConfigValue)) and the default as a string
/// literal (or a `&'static str` constant, where code elsewhere needs the
/// same default), parsed like a value from the environment.
///
/// It generates:
/// * `VIS struct NAME { VIS field: Type, ... }` with `Debug` and `Clone`;
/// * `VIS static TABLE: ConfigTable` listing the variables in order;
/// * `NAME::from_env()`, reading `RUCX_<PREFIX><VAR>` from the process
///   environment, and `NAME::from_lookup(f)`, asking `f` for each full
///   variable name (e.g. `"RUCX_TCP_NODELAY"`); both return a
///   [`ConfigError`](crate::config::ConfigError) for a value that does not
///   parse;
/// * `NAME::table()`, and `Default`, which uses the defaults. `Default`
///   panics if a default does not parse: that is a bug in the table, which
///   the component's unit test calling
///   [`ConfigTable::check_defaults`](crate::config::ConfigTable::check_defaults)
///   catches.
#[macro_export]
macro_rules! config_table {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident in $table:ident ($tname:literal, $prefix:literal) {
            $(
                $(#[doc = $doc:literal])*
                $var:ident $field:ident : $ty:ty = $default:expr
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                $vis $field: $ty,
            )*
        }

        #[doc = concat!(
            "The `RUCX_", $prefix, "*` variables behind [`", stringify!($name), "`]."
        )]
        $vis static $table: $crate::config::ConfigTable = $crate::config::ConfigTable {
            name: $tname,
            prefix: $prefix,
            fields: &[$(
                $crate::config::ConfigField {
                    name: stringify!($var),
                    default: $default,
                    doc: $crate::config::__trim_doc(concat!($($doc, "\n"),*)),
                    kind: <$ty as $crate::config::ConfigValue>::KIND,
                    syntax: <$ty as $crate::config::ConfigValue>::SYNTAX,
                    validate: $crate::config::validate::<$ty>,
                },
            )*],
        };

        impl $name {
            /// Reads the configuration from the `RUCX_*` environment
            /// variables, with defaults for those not set.
            #[allow(dead_code)]
            $vis fn from_env() -> ::core::result::Result<Self, $crate::config::ConfigError> {
                Self::from_lookup($crate::config::env_lookup)
            }

            /// Reads the configuration from `lookup`, which is asked for
            /// each full variable name (`RUCX_...`) and returns its text if
            /// set.
            #[allow(dead_code)]
            $vis fn from_lookup(
                lookup: impl Fn(&str) -> ::core::option::Option<::std::string::String>,
            ) -> ::core::result::Result<Self, $crate::config::ConfigError> {
                #[allow(unused_variables)]
                let lookup: &dyn Fn(&str) -> ::core::option::Option<::std::string::String> =
                    &lookup;
                ::core::result::Result::Ok(Self {
                    $(
                        $field: $crate::config::load_value::<$ty>(
                            $prefix,
                            stringify!($var),
                            $default,
                            lookup,
                        )?,
                    )*
                })
            }

            /// The table behind this configuration.
            #[allow(dead_code)]
            $vis fn table() -> &'static $crate::config::ConfigTable {
                &$table
            }
        }

        impl ::core::default::Default for $name {
            fn default() -> Self {
                match Self::from_lookup(|_| ::core::option::Option::None) {
                    ::core::result::Result::Ok(config) => config,
                    ::core::result::Result::Err(e) => {
                        panic!("bad default in config table {:?}: {}", $tname, e)
                    }
                }
            }
        }
    };
}

/// Declares an enum whose values are words of a configuration variable.
///
/// ```
/// # use rucx_ucs as ucs;
/// use ucs::config::ConfigValue;
///
/// ucs::config_enum! {
///     /// How a worker may be used by threads.
///     pub enum ThreadMode {
///         /// One thread only.
///         Single = "single",
///         /// Many threads, serialized by a lock.
///         Multi = "multi",
///     }
/// }
///
/// assert_eq!(ThreadMode::parse("MULTI"), Ok(ThreadMode::Multi));
/// assert_eq!(ThreadMode::KIND, "[single|multi]");
/// assert!(ThreadMode::parse("both").is_err());
/// assert_eq!(ThreadMode::Single.as_str(), "single");
/// ```
///
/// Words match case-insensitively. The enum derives `Debug`, `Clone`,
/// `Copy`, `PartialEq`, `Eq` and `Hash`, implements
/// [`ConfigValue`](crate::config::ConfigValue) (its kind lists the words,
/// e.g. `[single|multi]`) and `Display`, and gets `ALL` and `as_str()`.
#[macro_export]
macro_rules! config_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident = $text:literal
            ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $(
                $(#[$vmeta])*
                $variant,
            )+
        }

        impl $name {
            /// Every value, in declaration order.
            #[allow(dead_code)]
            $vis const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The configuration word of this value.
            #[allow(dead_code)]
            $vis fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl ::core::fmt::Display for $name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::config::ConfigValue for $name {
            const KIND: &'static str = $crate::__config_enum_kind!($($text),+);

            fn parse(
                text: &str,
            ) -> ::core::result::Result<Self, ::std::string::String> {
                let t = text.trim();
                $(
                    if t.eq_ignore_ascii_case($text) {
                        return ::core::result::Result::Ok($name::$variant);
                    }
                )+
                ::core::result::Result::Err(::std::format!(
                    "expected one of {}",
                    <Self as $crate::config::ConfigValue>::KIND
                ))
            }

            fn to_text(&self) -> ::std::string::String {
                ::std::string::ToString::to_string(self.as_str())
            }
        }
    };
}

/// `"[a|b|c]"` from the words of a [`config_enum!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __config_enum_kind {
    ($first:literal $(, $rest:literal)*) => {
        concat!("[", $first $(, "|", $rest)*, "]")
    };
}
