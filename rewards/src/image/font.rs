//! A built-in 5×7 bitmap font (lower-case letters, digits, space and common punctuation),
//! drawn for drift's grid captions so no font file is needed. Upper-case letters are drawn
//! with the lower-case glyphs; any other character is drawn as `?`.

use super::buffer::Image;

/// Glyph width in pixels.
pub const GLYPH_WIDTH: usize = 5;
/// Glyph height in pixels.
pub const GLYPH_HEIGHT: usize = 7;
/// Horizontal advance per character (glyph plus one pixel of spacing).
pub const ADVANCE: usize = GLYPH_WIDTH + 1;

type Glyph = [&'static str; GLYPH_HEIGHT];

const LETTERS: [Glyph; 26] = [
    [".....", ".....", ".###.", "....#", ".####", "#...#", ".####"], // a
    ["#....", "#....", "#.##.", "##..#", "#...#", "#...#", "####."], // b
    [".....", ".....", ".###.", "#....", "#....", "#...#", ".###."], // c
    ["....#", "....#", ".##.#", "#..##", "#...#", "#...#", ".####"], // d
    [".....", ".....", ".###.", "#...#", "#####", "#....", ".###."], // e
    ["..##.", ".#..#", ".#...", "###..", ".#...", ".#...", ".#..."], // f
    [".....", ".####", "#...#", "#...#", ".####", "....#", ".###."], // g
    ["#....", "#....", "#.##.", "##..#", "#...#", "#...#", "#...#"], // h
    ["..#..", ".....", ".##..", "..#..", "..#..", "..#..", ".###."], // i
    ["...#.", ".....", "..##.", "...#.", "...#.", "#..#.", ".##.."], // j
    ["#....", "#....", "#..#.", "#.#..", "##...", "#.#..", "#..#."], // k
    [".##..", "..#..", "..#..", "..#..", "..#..", "..#..", ".###."], // l
    [".....", ".....", "##.#.", "#.#.#", "#.#.#", "#...#", "#...#"], // m
    [".....", ".....", "#.##.", "##..#", "#...#", "#...#", "#...#"], // n
    [".....", ".....", ".###.", "#...#", "#...#", "#...#", ".###."], // o
    [".....", "####.", "#...#", "#...#", "####.", "#....", "#...."], // p
    [".....", ".####", "#...#", "#...#", ".####", "....#", "....#"], // q
    [".....", ".....", "#.##.", "##..#", "#....", "#....", "#...."], // r
    [".....", ".....", ".####", "#....", ".###.", "....#", "####."], // s
    [".#...", ".#...", "###..", ".#...", ".#...", ".#..#", "..##."], // t
    [".....", ".....", "#...#", "#...#", "#...#", "#..##", ".##.#"], // u
    [".....", ".....", "#...#", "#...#", "#...#", ".#.#.", "..#.."], // v
    [".....", ".....", "#...#", "#...#", "#.#.#", "#.#.#", ".#.#."], // w
    [".....", ".....", "#...#", ".#.#.", "..#..", ".#.#.", "#...#"], // x
    [".....", "#...#", "#...#", "#...#", ".####", "....#", ".###."], // y
    [".....", ".....", "#####", "...#.", "..#..", ".#...", "#####"], // z
];

const DIGITS: [Glyph; 10] = [
    [".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."], // 0
    ["..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."], // 1
    [".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"], // 2
    ["#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."], // 3
    ["...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."], // 4
    ["#####", "#....", "####.", "....#", "....#", "#...#", ".###."], // 5
    ["..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."], // 6
    ["#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."], // 7
    [".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."], // 8
    [".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."], // 9
];

const PUNCTUATION: [(char, Glyph); 18] = [
    (' ', [".....", ".....", ".....", ".....", ".....", ".....", "....."]),
    ('.', [".....", ".....", ".....", ".....", ".....", ".##..", ".##.."]),
    (',', [".....", ".....", ".....", ".....", ".##..", "..#..", ".#..."]),
    (':', [".....", ".##..", ".##..", ".....", ".##..", ".##..", "....."]),
    ('-', [".....", ".....", ".....", "#####", ".....", ".....", "....."]),
    ('+', [".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."]),
    ('=', [".....", ".....", "#####", ".....", "#####", ".....", "....."]),
    ('/', [".....", "....#", "...#.", "..#..", ".#...", "#....", "....."]),
    ('(', ["...#.", "..#..", ".#...", ".#...", ".#...", "..#..", "...#."]),
    (')', [".#...", "..#..", "...#.", "...#.", "...#.", "..#..", ".#..."]),
    ('?', [".###.", "#...#", "....#", "...#.", "..#..", ".....", "..#.."]),
    ('!', ["..#..", "..#..", "..#..", "..#..", "..#..", ".....", "..#.."]),
    ('\'', ["..#..", "..#..", ".#...", ".....", ".....", ".....", "....."]),
    ('_', [".....", ".....", ".....", ".....", ".....", ".....", "#####"]),
    ('%', ["##...", "##..#", "...#.", "..#..", ".#...", "#..##", "...##"]),
    ('#', [".#.#.", ".#.#.", "#####", ".#.#.", "#####", ".#.#.", ".#.#."]),
    ('*', [".....", "..#..", "#.#.#", ".###.", "#.#.#", "..#..", "....."]),
    ('|', ["..#..", "..#..", "..#..", "..#..", "..#..", "..#..", "..#.."]),
];

fn lookup(c: char) -> Option<&'static Glyph> {
    let c = c.to_ascii_lowercase();
    match c {
        'a'..='z' => LETTERS.get(c as usize - 'a' as usize),
        '0'..='9' => DIGITS.get(c as usize - '0' as usize),
        _ => PUNCTUATION.iter().find(|(p, _)| *p == c).map(|(_, g)| g),
    }
}

/// Whether `c` has a glyph of its own (rather than being drawn as `?`).
#[must_use]
pub fn has_glyph(c: char) -> bool {
    lookup(c).is_some()
}

/// The glyph of `c` as 7 rows of 5 bits (bit 4 is the leftmost pixel); `?` for characters
/// without a glyph.
#[must_use]
pub fn glyph(c: char) -> [u8; GLYPH_HEIGHT] {
    let g = lookup(c).or_else(|| lookup('?')).unwrap_or(&PUNCTUATION[0].1);
    g.map(|row| row.bytes().fold(0u8, |acc, b| (acc << 1) | u8::from(b == b'#')))
}

/// Width in pixels of `text` drawn at `scale` (no trailing spacing).
#[must_use]
pub fn text_width(text: &str, scale: usize) -> usize {
    (text.chars().count() * ADVANCE).saturating_sub(1) * scale
}

/// Draws `text` in `rgb` with its top-left corner at (`x`, `y`), each font pixel a
/// `scale`×`scale` block; pixels falling outside the image are clipped.
pub fn draw_text(image: &mut Image, x: usize, y: usize, text: &str, rgb: [u8; 3], scale: usize) {
    let s = scale.max(1);
    for (i, c) in text.chars().enumerate() {
        let rows = glyph(c);
        let left = x + i * ADVANCE * s;
        for (r, bits) in rows.iter().enumerate() {
            for col in 0..GLYPH_WIDTH {
                if bits >> (GLYPH_WIDTH - 1 - col) & 1 == 1 {
                    for (dy, dx) in (0..s).flat_map(|dy| (0..s).map(move |dx| (dy, dx))) {
                        image.set(left + col * s + dx, y + r * s + dy, rgb);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_glyph_is_well_formed_and_distinct() {
        let all: Vec<&Glyph> =
            LETTERS.iter().chain(&DIGITS).chain(PUNCTUATION.iter().map(|(_, g)| g)).collect();
        for g in &all {
            for row in g.iter() {
                assert_eq!(row.len(), GLYPH_WIDTH, "{g:?}");
                assert!(row.bytes().all(|b| b == b'#' || b == b'.'), "{g:?}");
            }
        }
        let distinct: HashSet<&Glyph> = all.iter().copied().collect();
        assert_eq!(distinct.len(), all.len(), "two characters share a glyph");
        assert!(('a'..='z').chain('0'..='9').all(has_glyph));
    }

    #[test]
    fn glyph_bits_and_fallbacks() {
        assert_eq!(glyph('-'), [0, 0, 0, 0b11111, 0, 0, 0]);
        assert_eq!(glyph('A'), glyph('a'));
        assert_eq!(glyph('é'), glyph('?'));
        assert!(!has_glyph('é'));
    }

    #[test]
    fn draws_scaled_and_clipped() {
        let mut img = Image::filled(20, 20, [255, 255, 255]);
        draw_text(&mut img, 0, 0, "-", [0, 0, 0], 2);
        // The dash is font row 3, i.e. image rows 6 and 7 at scale 2, columns 0..10.
        assert_eq!(img.get(9, 7), Some([0, 0, 0]));
        assert_eq!(img.get(10, 7), Some([255, 255, 255]));
        assert_eq!(img.get(0, 5), Some([255, 255, 255]));
        draw_text(&mut img, 18, 18, "mmm", [0, 0, 0], 3); // clipped, no panic
        assert_eq!(text_width("ab", 1), 11);
        assert_eq!(text_width("", 2), 0);
    }
}
