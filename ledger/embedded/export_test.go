package embedded

// WithoutCheckpoints makes a File opened with it keep every request in
// its journal, as before stores: tests of the journal's format, torn
// tails and corruption read and damage it after Close.
func WithoutCheckpoints() Option {
	return func(e *Engine) { e.noCheckpoints = true }
}

// SetCheckpointBytes sets how much journal j writes between checkpoints.
func SetCheckpointBytes(j *File, n int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.ckptBytes = n
}

// SetCacheBudget sets how many bytes of clean chunks j's cache may hold
// between requests.
func SetCacheBudget(j *File, n int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.st.budget = n
}
