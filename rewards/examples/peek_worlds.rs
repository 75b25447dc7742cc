//! Prints a few items of each world (prompt and target), for a quick look at the data.

use drift_rewards::worlds::code::{CodeWorld, CodeWorldConfig};
use drift_rewards::worlds::countdown::{CountdownConfig, CountdownWorld};
use drift_rewards::worlds::sudoku::{SudokuConfig, SudokuWorld};
use drift_rewards::worlds::{Split, TextItem};

fn main() -> Result<(), drift_rewards::RewardError> {
    let code = CodeWorld::new(CodeWorldConfig::default())?;
    for item in code.items(Split::Train, 6).iter().chain(&code.items(Split::HeldOut, 2)) {
        println!(
            "--- {} [{}]\n{}\n{}\n{:?}",
            item.id(),
            item.template,
            item.prompt(),
            item.target(),
            item.tests
        );
    }
    for size in [4, 9] {
        let sudoku = SudokuWorld::new(SudokuConfig { size, ..SudokuConfig::default() })?;
        for item in sudoku.items(Split::Train, 2) {
            let clues = item.puzzle.clues();
            println!("--- {} ({clues} clues)\n{}{}", item.id(), item.prompt(), item.target());
        }
    }
    let countdown = CountdownWorld::new(CountdownConfig::default())?;
    for item in countdown.items(Split::Train, 4) {
        println!("--- {}\n{}\n{}", item.id(), item.prompt(), item.target());
    }
    Ok(())
}
