use super::*;

/// Every command a person uses is in exactly one group, and every name listed exists.
#[test]
fn the_groups_list_every_visible_command_once() {
    let cmd = command();
    let listed: Vec<&str> = GROUPS.iter().flat_map(|(_, n)| n.iter().copied()).collect();
    for sub in cmd.get_subcommands() {
        let name = sub.get_name();
        let count = listed.iter().filter(|n| **n == name).count();
        if sub.is_hide_set() || name == "help" {
            assert_eq!(count, 0, "{name} is hidden but listed");
        } else {
            assert_eq!(count, 1, "{name} is listed {count} times");
        }
    }
    for name in listed.iter().chain(PLUMBING).chain(SESSIONLESS) {
        assert!(cmd.find_subcommand(name).is_some(), "no command {name}");
    }
    for name in JSONLESS {
        let mut path = name.split(' ');
        let outer = cmd.find_subcommand(path.next().unwrap());
        let found = match path.next() {
            Some(inner) => outer.and_then(|c| c.find_subcommand(inner)),
            None => outer,
        };
        assert!(found.is_some(), "no command {name}");
    }
    for name in PLUMBING {
        assert!(cmd.find_subcommand(name).unwrap().is_hide_set(), "{name}");
    }
}

#[test]
fn wrapping_breaks_at_words_and_indents() {
    assert_eq!(wrapped("aa bb cc", 2, 7), "aa bb\n  cc");
    assert_eq!(wrapped("a-very-long-word x", 0, 5), "a-very-long-word\nx");
}

/// Each command's summary is one short line.
#[test]
fn each_summary_is_one_short_line() {
    for sub in command().get_subcommands() {
        let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
        assert!(!about.is_empty(), "{} has no summary", sub.get_name());
        assert!(
            about.len() <= 64 && !about.contains('\n'),
            "{}: {about:?}",
            sub.get_name()
        );
    }
}
