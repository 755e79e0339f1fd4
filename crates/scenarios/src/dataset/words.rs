//! Common English words that are a single token (with a leading space) in the
//! usual BPE vocabularies: prompts built from them have a known length without
//! a tokenizer, and the built-in mock counts them exactly.

pub(crate) const WORDS: [&str; 128] = [
    "the", "of", "and", "to", "in", "is", "it", "that", "was", "for", "on", "are", "with", "as",
    "at", "be", "this", "have", "from", "or", "one", "had", "by", "word", "but", "not", "what",
    "all", "were", "we", "when", "your", "can", "said", "there", "use", "an", "each", "which",
    "she", "do", "how", "their", "if", "will", "up", "other", "about", "out", "many", "then",
    "them", "these", "so", "some", "her", "would", "make", "like", "him", "into", "time", "has",
    "look", "two", "more", "write", "go", "see", "number", "no", "way", "could", "people", "my",
    "than", "first", "water", "been", "call", "who", "oil", "its", "now", "find", "long", "down",
    "day", "did", "get", "come", "made", "may", "part", "over", "new", "sound", "take", "only",
    "little", "work", "know", "place", "year", "live", "me", "back", "give", "most", "very",
    "after", "thing", "our", "just", "name", "good", "sentence", "man", "think", "say", "great",
    "where", "help", "through", "much", "before", "line", "right",
];
