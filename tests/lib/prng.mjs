// SPDX-License-Identifier: MIT
// The randomized tests' generator: their runs replay from a printed seed.

/** mulberry32: a small PRNG of floats in [0, 1) from a 32-bit seed. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
