//! The placement rules of seed 004 as a table: each row reads like the seed, in a compact
//! notation, and runs in both calling modes.
//!
//! Notation: `sys` the configured system prompt, `role` the role definition promoted to the
//! system message, `user` the task, `ass` an assistant reply, `tool` a result, `S1`..`S4` the
//! special messages (role definition, TODO list, useful information, folder notes). In native form
//! an `ass` followed by `tool`s carries one native call per `tool`, answered by `tool` messages; in
//! text form the same row has plain replies and results as user messages.

use proptest::prelude::*;

use super::*;
use crate::message::NativeToolCall;

const SYSTEM: &str = "You are configured.";
const ROLE: &str = "You are the agent.";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Native,
    Text,
}

/// Messages of a row (without `sys`/`role`, which say how the system is configured).
fn history(row: &str, form: Form) -> Vec<Message> {
    let tokens: Vec<&str> = row.split_whitespace().collect();
    let mut messages = Vec::new();
    let mut call_ids: Vec<String> = Vec::new();
    let mut next_id = 0;
    for (index, token) in tokens.iter().enumerate() {
        match (*token, form) {
            ("user", _) => messages.push(Message::user("task")),
            ("ass", Form::Text) => messages.push(Message::assistant("reply", Vec::new())),
            ("ass", Form::Native) => {
                let calls = tokens[index + 1..]
                    .iter()
                    .take_while(|t| **t == "tool")
                    .count();
                call_ids = (0..calls)
                    .map(|_| {
                        next_id += 1;
                        format!("c{next_id}")
                    })
                    .collect();
                let calls = call_ids
                    .iter()
                    .map(|id| NativeToolCall::function(id, "fs_read", "{}"))
                    .collect();
                messages.push(Message::assistant("", calls));
                call_ids.reverse();
            }
            ("tool", Form::Text) => messages.push(Message::user_result("```flycode-result\n```")),
            ("tool", Form::Native) => {
                let id = call_ids.pop().expect("a tool follows an ass with calls");
                messages.push(Message::tool_result(id, "ok"));
            }
            (other, _) => panic!("unknown token {other}"),
        }
    }
    messages
}

/// The specials named in `names` (`"S1 S3"`).
fn specials(names: &str) -> SpecialMessages {
    let has = |name: &str| names.split_whitespace().any(|n| n == name);
    SpecialMessages {
        role_definition: has("S1").then(|| ROLE.to_owned()),
        role: has("S1").then(|| "S1".to_owned()),
        todo: has("S2").then(|| "S2".to_owned()),
        notes: has("S3").then(|| "S3".to_owned()),
        folder_notes: has("S4").then(|| "S4".to_owned()),
        hints: has("S5").then(|| "S5".to_owned()),
        jobs: has("S6").then(|| "S6".to_owned()),
    }
}

/// The notation of a request.
fn notation(request: &[Message]) -> String {
    request
        .iter()
        .map(|m| match (m.role, m.kind) {
            (Role::System, _) if m.content == SYSTEM => "sys".to_owned(),
            (Role::System, _) if m.content == ROLE => "role".to_owned(),
            (_, MessageKind::Special) if m.content == special::TASK_POINTER => "P".to_owned(),
            (_, MessageKind::Special) => m.content.clone(),
            (Role::User, MessageKind::Result) | (Role::Tool, _) => "tool".to_owned(),
            (Role::User, _) => "user".to_owned(),
            (Role::Assistant, _) => "ass".to_owned(),
            (Role::System, _) => panic!("unexpected system message {m:?}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `(what, system configured, history, specials, expected request)`.
const ROWS: &[(&str, bool, &str, &str, &str)] = &[
    (
        "seed example 1: the conversation starts",
        true,
        "user ass tool",
        "S1 S2 S3 S4",
        "sys user S1 S2 S3 S4 ass tool",
    ),
    (
        "seed example 1: the first request",
        true,
        "user",
        "S1 S2 S3 S4",
        "sys user S1 S2 S3 S4 P",
    ),
    (
        "seed example 2: a long conversation, after the third-from-last result",
        true,
        "user ass tool ass tool ass tool ass tool ass tool",
        "S1 S2 S3 S4",
        "sys user ass tool ass tool ass tool S1 S2 S3 S4 ass tool ass tool",
    ),
    (
        "seed example 2: later user messages and a closing reply",
        true,
        "user ass tool ass tool ass tool user ass",
        "S1 S2 S3 S4",
        "sys user ass tool S1 S2 S3 S4 ass tool ass tool user ass",
    ),
    (
        "seed example 3: the third-from-last result opens a parallel run",
        true,
        "user ass tool tool tool ass tool",
        "S1 S2 S3 S4",
        "sys user ass tool tool tool S1 S2 S3 S4 ass tool",
    ),
    (
        "seed example 3: the third-from-last result in the middle of a run",
        true,
        "user ass tool ass tool tool ass tool",
        "S1 S2 S3 S4",
        "sys user ass tool ass tool tool S1 S2 S3 S4 ass tool",
    ),
    (
        "seed example 3: the run reaches the end of the history",
        true,
        "user ass tool ass tool tool tool",
        "S1 S2 S3 S4",
        "sys user ass tool ass tool tool tool S1 S2 S3 S4 P",
    ),
    (
        "seed example 4: no special message, nothing inserted",
        true,
        "user ass tool ass tool ass tool ass tool",
        "",
        "sys user ass tool ass tool ass tool ass tool",
    ),
    (
        "seed example 4: nothing at all",
        false,
        "user ass tool",
        "",
        "user ass tool",
    ),
    (
        "seed example 6: four specials stay one block",
        true,
        "user ass tool ass tool ass tool ass tool",
        "S1 S2 S3 S4",
        "sys user ass tool ass tool S1 S2 S3 S4 ass tool ass tool",
    ),
    (
        "rule 2: empty kinds are left out, the order is kept",
        true,
        "user ass tool ass tool ass tool",
        "S2 S4",
        "sys user ass tool S2 S4 ass tool ass tool",
    ),
    (
        "rule 1: no system prompt, the role is promoted and stays special 1",
        false,
        "user ass tool ass tool ass tool ass tool",
        "S1 S2 S3 S4",
        "role user ass tool ass tool S1 S2 S3 S4 ass tool ass tool",
    ),
    (
        "rule 1: no system prompt at the start",
        false,
        "user",
        "S1 S2 S3 S4",
        "role user S1 S2 S3 S4 P",
    ),
    (
        "rule 1: neither system prompt nor role, no system message",
        false,
        "user ass tool",
        "S2 S3",
        "user S2 S3 ass tool",
    ),
    (
        "rule 1: a configured system prompt is not replaced by the role",
        true,
        "user",
        "S1",
        "sys user S1 P",
    ),
    (
        "rule 3: exactly three results",
        true,
        "user ass tool ass tool ass tool",
        "S1 S2 S3 S4",
        "sys user ass tool S1 S2 S3 S4 ass tool ass tool",
    ),
    (
        "rule 3: a final prose reply after the results",
        true,
        "user ass tool ass tool ass tool ass",
        "S1 S2 S3 S4",
        "sys user ass tool S1 S2 S3 S4 ass tool ass tool ass",
    ),
    (
        "rule 4: two results, after the first user message",
        true,
        "user ass tool ass tool",
        "S1 S2 S3 S4",
        "sys user S1 S2 S3 S4 ass tool ass tool",
    ),
    (
        "rule 4: the first of several user messages",
        true,
        "user ass user ass tool",
        "S1 S2 S3 S4",
        "sys user S1 S2 S3 S4 ass user ass tool",
    ),
    (
        "rule 4: no user message, right after the system message",
        true,
        "ass tool",
        "S1 S2 S3 S4",
        "sys S1 S2 S3 S4 ass tool",
    ),
    (
        "rule 4: an empty history",
        true,
        "",
        "S1 S2 S3 S4",
        "sys S1 S2 S3 S4",
    ),
    (
        "rule 4: an empty history and no system",
        false,
        "",
        "S3",
        "S3",
    ),
];

#[test]
fn placement_follows_the_seed_in_both_calling_modes() {
    for &(what, has_system, row, names, expected) in ROWS {
        for form in [Form::Native, Form::Text] {
            let system = has_system.then_some(SYSTEM);
            let request = assemble_request(system, &history(row, form), &specials(names));
            assert_eq!(notation(&request), expected, "{what} ({form:?})");
        }
    }
}

#[test]
fn rendered_specials_are_sent_as_user_messages_and_the_role_is_promoted_bare() {
    let memory = AgentMemory {
        todos: vec![TodoItem {
            content: "Fix it".into(),
            status: TodoStatus::Pending,
        }],
        notes: Vec::new(),
        completion: None,
    };
    let specials = SpecialMessages::render(ROLE, &memory, &[]);
    let request = assemble_request(None, &history("user", Form::Native), &specials);
    assert_eq!(request[0], Message::system(ROLE));
    assert_eq!(request[1], Message::user("task"));
    assert_eq!(request[2].role, Role::User);
    assert_eq!(request[2].kind, MessageKind::Special);
    assert!(request[2].content.starts_with(special::ROLE_HEADING));
    assert!(request[2].content.contains(ROLE));
    assert!(request[3].content.starts_with(special::TODO_HEADING));
    assert_eq!(
        request[4].content,
        special::TASK_POINTER,
        "the way back to the task"
    );
    assert_eq!(request.len(), 5);
}

/// One step of a generated conversation.
#[derive(Clone, Debug)]
enum Turn {
    User,
    Prose,
    Calls(usize),
}

fn turns() -> impl Strategy<Value = Vec<Turn>> {
    prop::collection::vec(
        prop_oneof![
            1 => Just(Turn::User),
            1 => Just(Turn::Prose),
            3 => (1usize..=4).prop_map(Turn::Calls),
        ],
        0..40,
    )
}

fn row(turns: &[Turn]) -> String {
    turns
        .iter()
        .map(|turn| match turn {
            Turn::User => "user".to_owned(),
            Turn::Prose => "ass".to_owned(),
            Turn::Calls(n) => format!("ass{}", " tool".repeat(*n)),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The notation's kinds in order: S1 < S2 < S3 < S4.
fn special_rank(message: &Message) -> Option<u8> {
    (message.kind == MessageKind::Special)
        .then(|| message.content.strip_prefix('S')?.parse().ok())
        .flatten()
}

proptest! {
    #[test]
    fn specials_are_one_ordered_block_that_never_splits_calls_from_results(
        turns in turns(),
        has_system in any::<bool>(),
        kinds in prop::array::uniform4(any::<bool>()),
    ) {
        let names: Vec<String> = kinds
            .iter()
            .enumerate()
            .filter(|(_, on)| **on)
            .map(|(i, _)| format!("S{}", i + 1))
            .collect();
        let specials = specials(&names.join(" "));
        let system = has_system.then_some(SYSTEM);
        let mut placements = Vec::new();
        for form in [Form::Native, Form::Text] {
            let history = history(&row(&turns), form);
            let request = assemble_request(system, &history, &specials);

            // The system message is first, and only there.
            let expects_system = has_system || kinds[0];
            prop_assert_eq!(request.first().map(|m| m.role) == Some(Role::System), expects_system);
            prop_assert!(request.iter().skip(1).all(|m| m.role != Role::System));

            // Without the system message and the specials, the history is unchanged.
            let rest: Vec<Message> = request
                .iter()
                .filter(|m| m.role != Role::System && m.kind != MessageKind::Special)
                .cloned()
                .collect();
            prop_assert_eq!(&rest, &history);

            // The specials are contiguous and in order.
            let at: Vec<usize> = request
                .iter()
                .enumerate()
                .filter(|(_, m)| m.kind == MessageKind::Special)
                .map(|(i, _)| i)
                .collect();
            // The pointer back at the task ends a block that nothing follows.
            let pointer = usize::from(!names.is_empty() && insertion_point(&history) == history.len() && !history.is_empty());
            prop_assert_eq!(at.len(), names.len() + pointer);
            prop_assert!(at.windows(2).all(|w| w[1] == w[0] + 1));
            let ranks: Vec<u8> = at.iter().filter_map(|&i| special_rank(&request[i])).collect();
            prop_assert!(ranks.windows(2).all(|w| w[0] < w[1]));

            // Never right after an assistant message with calls, never before one of its results.
            if let (Some(&first), Some(&last)) = (at.first(), at.last()) {
                if first > 0 {
                    prop_assert!(request[first - 1].tool_calls.is_empty());
                }
                if let Some(next) = request.get(last + 1) {
                    prop_assert!(!next.is_result());
                }
            }
            placements.push(insertion_point(&history));
        }
        // Both calling modes place the block at the same point.
        prop_assert_eq!(placements[0], placements[1]);
    }
}

#[test]
fn with_special_every_the_block_moves_only_every_n_results() {
    let results_before = |results: usize, every: usize| {
        let row = format!("user{}", " ass tool".repeat(results));
        let history = history(&row, Form::Native);
        let at = super::insertion_point_every(&history, every);
        history[..at].iter().filter(|m| m.is_result()).count()
    };
    // Seed 004: after the third-from-last result, moving every turn.
    let every_turn: Vec<usize> = (3..=10).map(|r| results_before(r, 1)).collect();
    assert_eq!(every_turn, [1, 2, 3, 4, 5, 6, 7, 8]);
    // Every fourth result: it stays put for four turns, then jumps.
    let every_fourth: Vec<usize> = (3..=10).map(|r| results_before(r, 4)).collect();
    assert_eq!(every_fourth, [1, 1, 1, 1, 5, 5, 5, 5]);
    // Never after one of the last three results, so the latest stay after it.
    for results in 3..=30 {
        for every in 1..=20 {
            assert!(results_before(results, every) <= results - 2);
        }
    }
}
