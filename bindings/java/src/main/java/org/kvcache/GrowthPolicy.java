package org.kvcache;

/** How a stateful cache's layers grow (kvc_growth_policy_t). */
public enum GrowthPolicy {
  /** Per-layer offsets: no two layers grow on the same decode step (the default). */
  STAGGERED(1),
  /** Every layer on the same grid. */
  UNIFORM(2);

  private final int code;

  GrowthPolicy(int code) {
    this.code = code;
  }

  /** The C value. */
  public int code() {
    return code;
  }
}
