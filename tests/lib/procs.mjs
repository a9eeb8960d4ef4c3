// SPDX-License-Identifier: MIT
// /proc readings of the gateway and its children for integration tests: processes and their
// parents and groups, zombies, descriptors, resident memory.
import fs from 'node:fs';

/** VmRSS of pid, in kB. */
export const rssKb = (pid) => Number(/VmRSS:\s*(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);
/** The descriptors pid has open (names in /proc/<pid>/fd). */
export const fdList = (pid) => fs.readdirSync(`/proc/${pid}/fd`);
/** What pid's descriptors are open on (pipe:[inode], socket:[inode], anon_inode:[pidfd], ...). */
export function fdTargets(pid) {
  const out = [];
  for (const fd of fdList(pid)) {
    try { out.push(fs.readlinkSync(`/proc/${pid}/fd/${fd}`)); } catch { /* closed meanwhile */ }
  }
  return out;
}

/** [pid, state, ppid, pgrp] of every process, from /proc/<pid>/stat. */
export function processes() {
  const out = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let st;
    try { st = fs.readFileSync(`/proc/${d}/stat`, 'utf8'); } catch { continue; }
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    out.push({ pid: Number(d), state: f[0], ppid: Number(f[1]), pgrp: Number(f[2]) });
  }
  return out;
}
/** Live (non-zombie) members of process group pgid. */
export const groupMembers = (pgid) => processes().filter((p) => p.pgrp === pgid && p.state !== 'Z').map((p) => p.pid);
/** Zombie children of pid: exited, never reaped. */
export const zombiesOf = (pid) => processes().filter((p) => p.ppid === pid && p.state === 'Z').map((p) => p.pid);
/** Live (non-zombie) direct children of ppid, in pid order. */
export const kids = (ppid) => processes().filter((p) => p.ppid === ppid && p.state !== 'Z').map((p) => p.pid).sort((a, b) => a - b);

/** Samples a process's VmRSS every 20 ms; stop() gives the growth over the first sample, in kB. */
export function rssSampler(pid) {
  const s = { base: rssKb(pid), max: 0 };
  s.max = s.base;
  const t = setInterval(() => { try { s.max = Math.max(s.max, rssKb(pid)); } catch { /* gone */ } }, 20).unref();
  s.stop = () => { clearInterval(t); try { s.max = Math.max(s.max, rssKb(pid)); } catch { /* gone */ } return s.max - s.base; };
  return s;
}
