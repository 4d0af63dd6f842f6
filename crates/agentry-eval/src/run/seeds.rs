//! The per-trial seeds tau2 draws: `random.seed(seed)`, then one `random.randint(0, 1_000_000)`
//! per trial (`src/tau2/runner/batch.py`), with CPython's Mersenne Twister, so a run here and
//! a run of tau2 with the same `--seed` record the same seed for each trial.

const N: usize = 624;
const M: usize = 397;

struct Mt {
    state: [u32; N],
    index: usize,
}

impl Mt {
    fn init_genrand(s: u32) -> Mt {
        let mut state = [0u32; N];
        state[0] = s;
        for i in 1..N {
            state[i] = 1_812_433_253u32
                .wrapping_mul(state[i - 1] ^ (state[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Mt { state, index: N }
    }

    /// CPython's `init_by_array`, which `random.seed(int)` uses with the integer's 32-bit
    /// words, least significant first.
    fn init_by_array(key: &[u32]) -> Mt {
        let mut mt = Mt::init_genrand(19_650_218);
        let s = &mut mt.state;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            s[i] = (s[i] ^ (s[i - 1] ^ (s[i - 1] >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                s[0] = s[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            s[i] = (s[i] ^ (s[i - 1] ^ (s[i - 1] >> 30)).wrapping_mul(1_566_083_941))
                .wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                s[0] = s[N - 1];
                i = 1;
            }
        }
        s[0] = 0x8000_0000;
        mt
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            for k in 0..N {
                let y = (self.state[k] & 0x8000_0000) | (self.state[(k + 1) % N] & 0x7fff_ffff);
                let mut v = self.state[(k + M) % N] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.state[k] = v;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `randint(0, hi)` for `hi < 2**32`: `_randbelow(hi + 1)` by rejection on
    /// `getrandbits(bit_length)`.
    fn randint(&mut self, hi: u32) -> u32 {
        let n = u64::from(hi) + 1;
        let k = 64 - n.leading_zeros();
        loop {
            let r = u64::from(self.next_u32() >> (32 - k));
            if r < n {
                return r as u32;
            }
        }
    }
}

/// The seeds of `trials` trials for a run seeded with `seed`, as tau2 draws them.
pub fn trial_seeds(seed: u64, trials: usize) -> Vec<u64> {
    let key: Vec<u32> = if seed == 0 {
        vec![0]
    } else {
        let mut words = vec![seed as u32, (seed >> 32) as u32];
        while words.len() > 1 && words.last() == Some(&0) {
            words.pop();
        }
        words
    };
    let mut mt = Mt::init_by_array(&key);
    (0..trials)
        .map(|_| u64::from(mt.randint(1_000_000)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::trial_seeds;

    #[test]
    fn the_seeds_are_pythons() {
        // python3 -c "import random; random.seed(300); print([random.randint(0,1000000) for _ in range(5)])"
        assert_eq!(
            trial_seeds(300, 5),
            [626_729, 373_753, 361_454, 1_567, 514_337]
        );
        assert_eq!(trial_seeds(7, 3), [339_563, 993_908, 158_176]);
        // A seed of two 32-bit words: random.seed(2**40 + 5).
        assert_eq!(trial_seeds((1 << 40) + 5, 3), [528_881, 542_031, 281_652]);
    }
}
