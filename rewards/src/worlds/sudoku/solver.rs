//! A bitmask backtracking Sudoku solver (most-constrained cell first) that counts solutions
//! up to a limit, and a random full-grid filler; both for 4×4 and 9×9 boards.

use super::verify::Board;
use drift_core::rng::SplitMix64;

/// Solver state: cells and, per unit, the digits already used (bit `d` for digit `d`).
struct State {
    n: usize,
    b: usize,
    cells: Vec<u8>,
    rows: Vec<u16>,
    cols: Vec<u16>,
    boxes: Vec<u16>,
}

impl State {
    /// `None` when the clues already conflict.
    fn new(board: &Board) -> Option<Self> {
        let (n, b) = (board.n(), board.box_side());
        let mut s = Self {
            n,
            b,
            cells: vec![0; n * n],
            rows: vec![0; n],
            cols: vec![0; n],
            boxes: vec![0; n],
        };
        for (i, &v) in board.cells().iter().enumerate() {
            if v != 0 {
                if s.candidates(i) & (1 << v) == 0 {
                    return None;
                }
                s.set(i, v);
            }
        }
        Some(s)
    }

    fn bx(&self, i: usize) -> usize {
        let (r, c) = (i / self.n, i % self.n);
        r / self.b * self.b + c / self.b
    }

    /// Digits allowed at empty cell `i`, as a bitmask over bits `1..=n`.
    fn candidates(&self, i: usize) -> u16 {
        let all = ((1u16 << (self.n + 1)) - 1) & !1;
        all & !(self.rows[i / self.n] | self.cols[i % self.n] | self.boxes[self.bx(i)])
    }

    fn set(&mut self, i: usize, v: u8) {
        let bit = 1 << v;
        self.cells[i] = v;
        self.rows[i / self.n] |= bit;
        self.cols[i % self.n] |= bit;
        let k = self.bx(i);
        self.boxes[k] |= bit;
    }

    fn clear(&mut self, i: usize) {
        let bit = !(1u16 << self.cells[i]);
        self.cells[i] = 0;
        self.rows[i / self.n] &= bit;
        self.cols[i % self.n] &= bit;
        let k = self.bx(i);
        self.boxes[k] &= bit;
    }

    /// The empty cell with the fewest candidates, and them; `None` when full.
    fn most_constrained(&self) -> Option<(usize, u16)> {
        (0..self.n * self.n)
            .filter(|&i| self.cells[i] == 0)
            .map(|i| (i, self.candidates(i)))
            .min_by_key(|&(_, c)| c.count_ones())
    }

    /// Counts solutions up to `limit`; `order` permutes the digits tried (for random fills)
    /// and `first` receives the first solution found.
    fn search(&mut self, limit: usize, order: &[u8], first: &mut Option<Vec<u8>>) -> usize {
        let Some((i, cand)) = self.most_constrained() else {
            first.get_or_insert_with(|| self.cells.clone());
            return 1;
        };
        let mut found = 0;
        for &v in order {
            if cand & (1 << v) != 0 {
                self.set(i, v);
                found += self.search(limit - found, order, first);
                self.clear(i);
                if found >= limit {
                    break;
                }
            }
        }
        found
    }
}

/// The number of solutions of `board`, counted up to `limit`, and the first one found.
pub fn solve(board: &Board, limit: usize) -> (usize, Option<Board>) {
    let Some(mut s) = State::new(board) else { return (0, None) };
    let order: Vec<u8> = (1..=board.n() as u8).collect();
    let mut first = None;
    let count = s.search(limit.max(1), &order, &mut first);
    (count, first.and_then(|c| Board::new(c).ok()))
}

/// A uniformly shuffled search's first full grid of side `n` (4 or 9).
pub fn random_full(n: usize, rng: &mut SplitMix64) -> Board {
    let empty = Board::new(vec![0; n * n]).expect("4 or 9");
    let mut s = State::new(&empty).expect("empty board is consistent");
    let mut order: Vec<u8> = (1..=n as u8).collect();
    rng.shuffle32(&mut order);
    // A random first row makes the grids diverse beyond the digit relabelling.
    let mut row: Vec<u8> = (1..=n as u8).collect();
    rng.shuffle32(&mut row);
    for (c, &v) in row.iter().enumerate() {
        s.set(c, v);
    }
    let mut first = None;
    s.search(1, &order, &mut first);
    Board::new(first.expect("a board with a valid first row completes")).expect("valid size")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_fills() {
        let mut rng = SplitMix64::new(3);
        for n in [4, 9] {
            let full = random_full(n, &mut rng);
            assert!(full.is_solved());
            assert_eq!(solve(&full, 2).0, 1);
        }
        assert_eq!(solve(&Board::new(vec![0; 16]).unwrap(), 1000).0, 288);
        let conflict = Board::try_from("11..............".to_string()).unwrap();
        assert_eq!(solve(&conflict, 2).0, 0);
    }
}
