package org.kvcache;

/** Block table format of decode attention (kvc_table_format_t). */
public enum TableFormat {
  /** Row b holds the blocks of sequence b, stride entries per row. */
  PADDED(1),
  /** FlashInfer's CSR: indptr and indices. */
  CSR(2);

  private final int code;

  TableFormat(int code) {
    this.code = code;
  }

  /** The C value (KVC_TABLE_*). */
  public int code() {
    return code;
  }
}
