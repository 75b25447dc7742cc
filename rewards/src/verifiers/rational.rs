//! Exact rational arithmetic on `i128` with overflow checks, for Countdown (where `6 / 4 * 2`
//! must equal 3 exactly) and for fraction answers in math.

/// A reduced fraction `num / den` with `den > 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    num: i128,
    den: i128,
}

fn gcd(mut a: i128, mut b: i128) -> i128 {
    a = a.abs();
    b = b.abs();
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Ratio {
    /// `num / den` reduced; `None` when `den == 0`.
    pub fn new(num: i128, den: i128) -> Option<Self> {
        if den == 0 {
            return None;
        }
        let g = gcd(num, den).max(1);
        let s = if den < 0 { -1 } else { 1 };
        Some(Self { num: s * num / g, den: s * den / g })
    }

    /// The integer `n`.
    pub fn int(n: i128) -> Self {
        Self { num: n, den: 1 }
    }

    /// Numerator (sign carrier).
    pub fn num(&self) -> i128 {
        self.num
    }

    /// Denominator (> 0).
    pub fn den(&self) -> i128 {
        self.den
    }

    /// The integer value when the denominator is 1.
    pub fn as_integer(&self) -> Option<i128> {
        (self.den == 1).then_some(self.num)
    }

    /// The nearest `f64`.
    pub fn to_f64(&self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// `self + o`, `None` on overflow.
    pub fn checked_add(self, o: Self) -> Option<Self> {
        let n = self.num.checked_mul(o.den)?.checked_add(o.num.checked_mul(self.den)?)?;
        Self::new(n, self.den.checked_mul(o.den)?)
    }

    /// `self - o`, `None` on overflow.
    pub fn checked_sub(self, o: Self) -> Option<Self> {
        self.checked_add(Self { num: o.num.checked_neg()?, den: o.den })
    }

    /// `self · o`, `None` on overflow.
    pub fn checked_mul(self, o: Self) -> Option<Self> {
        Self::new(self.num.checked_mul(o.num)?, self.den.checked_mul(o.den)?)
    }

    /// `self / o`, `None` on division by zero or overflow.
    pub fn checked_div(self, o: Self) -> Option<Self> {
        if o.num == 0 {
            return None;
        }
        Self::new(self.num.checked_mul(o.den)?, self.den.checked_mul(o.num)?)
    }
}

impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.den == 1 {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_arithmetic() {
        let r = |n, d| Ratio::new(n, d).unwrap();
        assert_eq!(r(6, 4), r(3, 2));
        assert_eq!(r(3, -6), r(-1, 2));
        assert_eq!(
            r(6, 1).checked_div(r(4, 1)).unwrap().checked_mul(r(2, 1)).unwrap().as_integer(),
            Some(3)
        );
        assert_eq!(r(1, 3).checked_add(r(1, 6)).unwrap(), r(1, 2));
        assert_eq!(r(1, 3).checked_sub(r(1, 2)).unwrap(), r(-1, 6));
        assert!(r(1, 1).checked_div(Ratio::int(0)).is_none());
        assert!(Ratio::new(1, 0).is_none());
        assert!(Ratio::int(i128::MAX).checked_add(Ratio::int(1)).is_none());
        assert_eq!(r(-3, 4).to_string(), "-3/4");
    }
}
