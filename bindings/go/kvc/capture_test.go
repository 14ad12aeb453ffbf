package kvc

import "testing"

// The decoding of kvcgo_capture's result (kvcache.i). The 'M' form is
// covered by every error test of package kvcache; the 'O' form, returned
// when the message cannot be copied, is built here by hand.
func TestStatusErrorDecoding(t *testing.T) {
	if err := statusError(""); err != nil {
		t.Errorf("empty = %v, want nil", err)
	}
	err := statusError("O\x00\x00\x00\x00") // 1 + 4: status -4
	e, ok := err.(*Error)
	if !ok || e.Status != int32(KVC_ERR_OUT_OF_BLOCKS) || e.Message == "" {
		t.Errorf("'O' form = %#v", err)
	}
	if got := e.Error(); got != "KVC_ERR_OUT_OF_BLOCKS: "+e.Message {
		t.Errorf("Error() = %q", got)
	}
}
