/**
 * Edit distance counting insertions, deletions, substitutions and swaps of neighbours (optimal string alignment),
 * for did-you-mean hints: `prot` is one typo away from `port`.
 */
export function levenshtein(a: string, b: string): number {
  if (a === b) return 0;
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row[j] = j;
        continue;
      }
      const up = rows[i - 1] ?? [];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((up[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (up[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, (rows[i - 2]?.[j - 2] ?? 0) + 1);
      row[j] = d;
    }
    rows.push(row);
  }
  return rows[a.length]?.[b.length] ?? 0;
}

// `max_body_bytes`, `MaxBodyBytes` and `max-body-bytes` all mean maxBodyBytes.
const normalize = (s: string): string => s.toLowerCase().replace(/[-_\s]/g, '');

/** The closest candidate when it is plausibly a typo of `input`, else undefined. */
export function didYouMean(input: string, candidates: readonly string[]): string | undefined {
  const wanted = normalize(input);
  const exact = candidates.find((c) => normalize(c) === wanted);
  if (exact !== undefined) return exact;
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const d = levenshtein(wanted, normalize(candidate));
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  const threshold = Math.max(1, Math.floor(Math.max(wanted.length, 3) / 3));
  return bestDistance <= threshold ? best : undefined;
}
