package org.kvcache;

/**
 * Settings of a {@link StatefulCache} beside the config's model spec
 * (kvc_stateful_options_t). Unset values take the library's defaults: HND
 * layout, growth step 128, staggered growth, max length 2^30, nothing
 * preallocated.
 */
public final class StatefulOptions {
  int batch;
  Layout layout;
  int growthStep;
  GrowthPolicy growthPolicy;
  int maxLength;
  int initialLength;

  /** Options for {@code batch} rows (beams or requests), 1..1024. */
  public StatefulOptions(int batch) {
    this.batch = Args.u32("batch", batch);
  }

  /** HND (OpenVINO's, the default) or NHD. */
  public StatefulOptions layout(Layout layout) {
    this.layout = Args.notNull("layout", layout);
    return this;
  }

  /** Tokens a growth adds (0 = 128). */
  public StatefulOptions growthStep(int tokens) {
    this.growthStep = Args.u32("growth_step", tokens);
    return this;
  }

  /** The growth policy. */
  public StatefulOptions growthPolicy(GrowthPolicy policy) {
    this.growthPolicy = Args.notNull("growth_policy", policy);
    return this;
  }

  /** Longest row allowed (0 = 2^30). */
  public StatefulOptions maxLength(int tokens) {
    this.maxLength = Args.u32("max_length", tokens);
    return this;
  }

  /** Tokens per row allocated at creation. */
  public StatefulOptions initialLength(int tokens) {
    this.initialLength = Args.u32("initial_length", tokens);
    return this;
  }

  void toNative(kvc_stateful_options_t o) {
    o.setBatch(batch);
    o.setLayout(layout == null ? 0 : layout.code());
    o.setGrowth_step(growthStep);
    o.setGrowth_policy(growthPolicy == null ? 0 : growthPolicy.code());
    o.setMax_length(maxLength);
    o.setInitial_length(initialLength);
  }
}
