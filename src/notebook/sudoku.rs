//! Sudoku decoding orders (notebook `sudoku_orders`): the frozen Sudoku dLLM's held-out solve
//! rate under each heuristic position rule and a learned SAS order policy, and, for one puzzle,
//! the grids side by side with the step at which each cell was committed.

use drift_core::rng::RngKey;
use drift_dllm::grpo::{SudokuTextTask, TextTask};
use drift_dllm::model::DiffusionLm;
use drift_dllm::sas::{evaluate_order, SasOrderPolicy};
use drift_dllm::tokenizer::PAD_ID;
use drift_rewards::image::Image;
use drift_rewards::worlds::sudoku::SudokuItem;
use drift_samplers::dllm::{
    decode, decode_with_policy, DecodeBatch, DecodeConfig, OrderPolicy, PositionRule, Trajectory,
};

use super::decoding::rule_name;
use super::display::{colormap, Png, Table};
use super::Result;

/// The orders compared: the quota rules, and the learned policy when given (greedy). It owns
/// the policy, so a notebook can keep it across cells.
pub struct Orders {
    /// Heuristic rules (low-confidence, margin, entropy, random).
    pub rules: Vec<PositionRule>,
    /// A trained SAS policy, shown as `sas`.
    pub policy: Option<SasOrderPolicy>,
}

impl Orders {
    /// `(name, rule, policy)` for each order, in display order.
    fn each(&self) -> Vec<(String, PositionRule, Option<&SasOrderPolicy>)> {
        let mut v: Vec<_> = self.rules.iter().map(|r| (rule_name(r), *r, None)).collect();
        if let Some(p) = &self.policy {
            v.push(("sas".into(), PositionRule::LowConfidence, Some(p)));
        }
        v
    }
}

/// Solve rate and cell accuracy of every order over `items` (seed 0: the random rule's draw).
pub fn order_table(
    model: &DiffusionLm,
    task: &SudokuTextTask,
    items: &[SudokuItem],
    base: &DecodeConfig,
    orders: &Orders,
) -> Result<Table> {
    let mut t =
        Table::new("held-out puzzles by decoding order", &["order", "solve rate", "cell accuracy"]);
    for (name, rule, policy) in orders.each() {
        let cfg = DecodeConfig { position: rule, ..base.clone() };
        let greedy = policy.map(|p| p.greedy());
        let order = greedy.as_ref().map(|g| g as &dyn OrderPolicy);
        let e = evaluate_order(model, task, items, &cfg, order, 64, 0)?;
        t.push(vec![
            name,
            format!("{:.1}%", 100.0 * e.solve_rate),
            format!("{:.1}%", 100.0 * e.cell_accuracy),
        ])?;
    }
    Ok(t)
}

/// Pixels of one board cell.
const CELL: usize = 12;

/// The digit and commit step of each of the board's `n²` cells in row 0 of `traj`: the
/// completion's digit tokens in order; cells a malformed answer did not write are `('?', −1)`.
fn cell_steps(task: &SudokuTextTask, traj: &Trajectory, n: usize) -> Result<Vec<(char, i64)>> {
    let p = traj.prompt_len;
    let tokens = traj.tokens.to_vec2::<u32>()?;
    let steps = traj.commit_step.to_vec2::<i64>()?;
    let mut cells = Vec::new();
    for j in p..tokens[0].len() {
        let text = task.completion_text(&tokens[0][j..=j])?;
        if let Some(c) = text.chars().next().filter(|c| c.is_ascii_digit()) {
            cells.push((c, steps[0][j]));
        }
    }
    cells.resize(n * n, ('?', -1));
    Ok(cells)
}

/// One puzzle decoded under every order (one position per step), its boards side by side:
/// each cell shows the digit written and is coloured by the step that committed it (dark =
/// early, yellow = late, grey = not written); clue cells are framed in black. Returns the picture and, per order,
/// whether the grid was solved.
pub fn orders_picture(
    model: &DiffusionLm,
    task: &SudokuTextTask,
    item: &SudokuItem,
    base: &DecodeConfig,
    orders: &Orders,
) -> Result<(Png, Vec<(String, bool)>)> {
    let n = item.puzzle.n();
    let prompt = vec![task.prompt_ids(item)?];
    let batch = DecodeBatch {
        prompts: &prompt,
        group_size: 1,
        pad_id: PAD_ID,
        padding: model.config().padding(),
        first_row: 0,
        greedy_per_group: 0,
    };
    let each = orders.each();
    let side = n * CELL + 8;
    let mut img = Image::filled(each.len() * side + 4, side + 4, [255, 255, 255]);
    let mut solved = Vec::new();
    for (k, (name, rule, policy)) in each.into_iter().enumerate() {
        let cfg = DecodeConfig { position: rule, ..base.clone() };
        let key = RngKey::new(0).stream("sas/eval");
        let traj = match policy {
            Some(p) => decode_with_policy(model, &cfg, &batch, key, model.device(), &p.greedy())?,
            None => decode(model, &cfg, &batch, key, model.device())?,
        };
        let text = task.completion_text(&traj.tokens.to_vec2::<u32>()?[0][traj.prompt_len..])?;
        solved.push((name.clone(), task.score_one(item, &text).passed));
        let cells = cell_steps(task, &traj, n)?;
        let last = cells.iter().map(|c| c.1).max().unwrap_or(1).max(1);
        let x0 = 4 + k * side;
        for (i, &(c, step)) in cells.iter().enumerate() {
            let (x, y) = (x0 + (i % n) * CELL, 4 + (i / n) * CELL);
            let clue = item.puzzle.cells()[i] != 0;
            let bg = if step >= 0 { colormap(step as f64 / last as f64) } else { [200, 200, 200] };
            for yy in y..y + CELL - 1 {
                for xx in x..x + CELL - 1 {
                    let edge = xx == x || yy == y || xx == x + CELL - 2 || yy == y + CELL - 2;
                    img.set(xx, yy, if clue && edge { [0, 0, 0] } else { bg });
                }
            }
            let light = u32::from(bg[0]) + u32::from(bg[1]) + u32::from(bg[2]) > 380;
            let ink = if light { [0, 0, 0] } else { [255, 255, 255] };
            img.draw_text(x + 3, y + 3, &c.to_string(), ink, 1);
        }
    }
    Ok((Png::from_image(&img.upscale(3)?)?, solved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use drift_dllm::grpo::SudokuTaskConfig;
    use drift_dllm::model::LoadOptions;

    #[test]
    fn the_orders_table_and_picture_cover_every_order_and_color_commit_steps() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/checkpoints/dllm-sudoku4-v1");
        let model = DiffusionLm::from_dir(dir, &LoadOptions::frozen()).unwrap();
        let tok = model.tokenizer().cloned().unwrap();
        let task =
            SudokuTextTask::new(&SudokuTaskConfig { clues: 5, ..Default::default() }, tok).unwrap();
        let items = task.eval_items(4);
        let base = DecodeConfig {
            gen_length: 28,
            block_length: 28,
            steps: 28,
            stop_tokens: vec![drift_dllm::tokenizer::EOS_ID],
            ..DecodeConfig::default()
        };
        let policy = SasOrderPolicy::new(
            drift_dllm::sas::SasPolicyConfig {
                init_linear: [1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                ..Default::default()
            },
            0,
            &candle_core::Device::Cpu,
        )
        .unwrap();
        let orders = Orders {
            rules: vec![PositionRule::LowConfidence, PositionRule::Random],
            policy: Some(policy),
        };
        let t = order_table(&model, &task, &items, &base, &orders).unwrap();
        // The top-1 policy is the low-confidence rule: equal rows.
        assert_eq!(t.cell(0, "solve rate"), t.cell(2, "solve rate"));
        assert_eq!(t.cell(2, "order"), Some("sas"));
        let (png, solved) = orders_picture(&model, &task, &items[0], &base, &orders).unwrap();
        assert_eq!(solved.len(), 3);
        let img = image::load_from_memory(&png.bytes).unwrap().to_rgb8();
        assert_eq!(img.dimensions().0 as usize, 3 * (3 * (4 * CELL + 8) + 4));
    }
}
