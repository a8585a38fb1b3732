//! `{{name}}` placeholders filled in one pass: a value is never searched for placeholders itself,
//! and a placeholder nobody knows is left as written.

/// Replaces every `{{name}}` of `template` whose `name` is in `values`; anything else is copied.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after_open = &rest[open + 2..];
        let known = after_open.find("}}").and_then(|close| {
            let name = &after_open[..close];
            values
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value, close))
        });
        match known {
            Some((value, close)) => {
                out.push_str(value);
                rest = &after_open[close + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after_open;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_known_placeholders_and_keeps_unknown_ones() {
        let filled = fill(
            "a {{x}} b {{unknown}} c {{y}}{{x}} {{",
            &[("x", "1"), ("y", "2")],
        );
        assert_eq!(filled, "a 1 b {{unknown}} c 21 {{");
    }

    #[test]
    fn values_are_not_filled_again() {
        assert_eq!(
            fill("{{a}} {{b}}", &[("a", "{{b}}"), ("b", "B")]),
            "{{b}} B"
        );
    }

    #[test]
    fn an_unknown_placeholder_does_not_hide_a_known_one() {
        assert_eq!(fill("{{ {{x}} }}", &[("x", "1")]), "{{ 1 }}");
    }
}
