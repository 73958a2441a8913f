//! Serialises `f64` the way JavaScript's `JSON.stringify` does for the values pi emits:
//! integral values without a fraction (`3`, not `3.0`), everything else in shortest form.
//! Clients written against pi compare and display these numbers, and a `0.0` where pi sends
//! `0` is a needless difference on the wire.

use serde::Serializer;

/// Largest integer a JavaScript number represents exactly (2^53 - 1).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// `serialize_with` helper for `f64` fields.
pub fn serialize<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    let v = *value;
    if v.is_finite() && v.fract() == 0.0 && v.abs() <= MAX_SAFE_INTEGER {
        // Exact: the value is integral and within the i64-representable safe range.
        #[allow(clippy::cast_possible_truncation)]
        serializer.serialize_i64(v as i64)
    } else if v.is_finite() {
        serializer.serialize_f64(v)
    } else {
        // JSON.stringify writes NaN and Infinity as null.
        serializer.serialize_none()
    }
}

/// `serialize_with` helper for `Option<f64>` fields (used with `skip_serializing_if`).
pub fn serialize_option<S: Serializer>(
    value: &Option<f64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => serialize(v, serializer),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize, schemars::JsonSchema)]
    struct N(#[serde(serialize_with = "super::serialize")] f64);

    fn show(v: f64) -> String {
        serde_json::to_string(&N(v)).unwrap()
    }

    #[test]
    fn integral_values_have_no_fraction() {
        assert_eq!(show(0.0), "0");
        assert_eq!(show(3.0), "3");
        assert_eq!(show(-15.0), "-15");
        assert_eq!(show(200000.0), "200000");
    }

    #[test]
    fn fractions_are_shortest_form() {
        assert_eq!(show(0.3), "0.3");
        assert_eq!(show(0.00105), "0.00105");
        assert_eq!(show(3.75), "3.75");
    }

    #[test]
    fn non_finite_is_null() {
        assert_eq!(show(f64::NAN), "null");
        assert_eq!(show(f64::INFINITY), "null");
    }
}
