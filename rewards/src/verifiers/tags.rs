//! `<answer>…</answer>` extraction shared by the Countdown and Sudoku verifiers (the R1 /
//! TinyZero answer format).

/// The content of the last complete `<answer>…</answer>` pair in `text`, if any.
pub fn last_answer(text: &str) -> Option<&str> {
    let open = text.rfind("<answer>")?;
    let body = &text[open + "<answer>".len()..];
    let close = body.find("</answer>")?;
    Some(&body[..close])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_complete_pair() {
        assert_eq!(last_answer("<answer>1</answer> then <answer> 2 </answer>"), Some(" 2 "));
        assert_eq!(last_answer("<answer>1"), None);
        assert_eq!(last_answer("none"), None);
    }
}
