// SPDX-License-Identifier: MIT
// Time bounds for a slow run: a gateway built with AddressSanitizer (about 3x slower, as in
// hostile.test.mjs) on a loaded runner. Only upper bounds and deadlines scale; a lower bound
// (a grace period, a hold, a timeout that must not fire early) never does. Where a test can
// step the example server instead (SIGUSR1, --hold-init, stubborn on_cancel), it does that and
// needs no bound at all.
import fs from 'node:fs';

import { GW_BIN } from './gw.mjs';

/** The gateway binary carries AddressSanitizer's runtime. */
export const ASAN = (() => { try { return fs.readFileSync(GW_BIN).includes('__asan_init'); } catch { return false; } })();

/**
 * Factor for upper time bounds: 3 under ASan, times GW_TEST_TIME_FACTOR when set (a runner known
 * to be slower still).
 */
export const SLOW = (ASAN ? 3 : 1) * (Number(process.env.GW_TEST_TIME_FACTOR) || 1);

/** ms scaled for an upper bound or a deadline. */
export const scaled = (ms) => Math.round(ms * SLOW);
