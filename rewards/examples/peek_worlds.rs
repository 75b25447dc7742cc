//! Prints a few items of each world (prompt and target), for a quick look at the data.

use drift_rewards::worlds::code::{CodeWorld, CodeWorldConfig};
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
    Ok(())
}
