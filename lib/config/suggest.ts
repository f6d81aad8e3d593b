/** Levenshtein edit distance (insert, delete, substitute each cost 1). */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}

/**
 * The known key closest to an unknown one, when it is close enough to be a likely typo: at most a
 * third of the key's length in edits (and at most 3), so `web_listen_adr` suggests `web_listen_addr`
 * but `colour` suggests nothing; a prefix either way (`mongo` → `mongodb`) also counts.
 */
export function nearestKey(unknown: string, known: readonly string[]): string | undefined {
  const lowered = unknown.toLowerCase().replaceAll('-', '_');
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const candidate of known) {
    const distance = editDistance(lowered, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  const limit = Math.min(3, Math.max(1, Math.floor(unknown.length / 3)));
  if (bestDistance <= limit) return best;
  // A shortened or extended key (`mongo` for `mongodb`) is a typo too, however many letters it drops.
  if (lowered.length >= 3) return known.find((k) => k.startsWith(lowered) || lowered.startsWith(k));
  return undefined;
}
