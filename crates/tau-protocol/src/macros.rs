//! Small macros shared by the type modules.

/// Implements `Serialize` for an enum of newtype variants by serialising the inner value.
/// Used where each inner struct writes its own `type`/`role` tag, so that the struct is
/// tagged also when it is written on its own; the enum derives only `Deserialize`.
#[macro_export]
macro_rules! serialize_by_variant {
    ($enum:ident { $($variant:ident),* $(,)? }) => {
        impl serde::Serialize for $enum {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    $( $enum::$variant(inner) => inner.serialize(serializer), )*
                }
            }
        }
    };
}
