//! Lists as sent, kept until the wallet's database next changes: the history's pages,
//! the VTXO list and the exits' lists.
//!
//! A phone app polls the first page of the history, and lists the VTXOs to show when
//! they expire; rendering a page of 100 movements as JSON (~47 KB) costs about a
//! millisecond, and listing 2,000 VTXOs (each read from the store as bark's whole VTXO,
//! exit chain included, then rendered: ~1 MB) tens of milliseconds, far more than
//! sending what was rendered before. A list is kept with the store's commit count read
//! before the list was: any write to the wallet database makes every kept list a miss,
//! so a list is never served older than a read would be. Bounded: a few lists, none
//! larger than its cache's limit (a larger one is rendered for each request).

use std::sync::Mutex;

use crate::api::v1::common::RenderedPage;

/// Which history page: `before` (the cursor) and `limit`.
pub type PageKey = (Option<u32>, usize);

pub struct PageCache<K> {
    /// Most recently used last; all of one generation (older ones are dropped).
    pages: Mutex<Vec<(K, u64, RenderedPage)>>,
    max_pages: usize,
    max_bytes: usize,
}

impl PageCache<PageKey> {
    /// The history's: the first page and a few more a client may be paging through; a
    /// large page (up to 1,000 movements) is rendered for each request.
    pub fn history() -> Self {
        PageCache::new(8, 256 * 1024)
    }
}

impl PageCache<bool> {
    /// The VTXO list's, by `all` (spent ones too) or not: both lists of a wallet of up
    /// to about 16,000 VTXOs (~500 bytes of JSON each), at most 16 MiB in all.
    pub fn vtxo_lists() -> Self {
        PageCache::new(2, 8 * 1024 * 1024)
    }
}

impl PageCache<(crate::engine::ExitList, bool)> {
    /// The exits' lists, by which exits and `history` or not: the few a client polls
    /// (all, live, finished), each of a wallet of up to about 20,000 exits (~200 bytes
    /// of JSON each without their history), at most 16 MiB in all.
    pub fn exit_lists() -> Self {
        PageCache::new(4, 4 * 1024 * 1024)
    }
}

impl<K: PartialEq + Copy> PageCache<K> {
    pub fn new(max_pages: usize, max_bytes: usize) -> Self {
        PageCache {
            pages: Mutex::new(Vec::new()),
            max_pages,
            max_bytes,
        }
    }

    /// The list kept for `key`, if it was rendered at this store `generation`.
    pub fn get(&self, key: K, generation: u64) -> Option<RenderedPage> {
        let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        let at = pages
            .iter()
            .position(|(k, g, _)| *k == key && *g == generation)?;
        let entry = pages.remove(at);
        let page = entry.2.clone();
        pages.push(entry);
        Some(page)
    }

    /// Keep `page`, rendered from a read that began after `generation` was read.
    pub fn put(&self, key: K, generation: u64, page: RenderedPage) {
        if page.body.len() > self.max_bytes {
            return;
        }
        let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        // Lists of an older generation will never be served again; a newer one than
        // this list's means this list is already out of date.
        if pages.iter().any(|(_, g, _)| *g > generation) {
            return;
        }
        pages.retain(|(k, g, _)| *g == generation && *k != key);
        if pages.len() == self.max_pages {
            pages.remove(0);
        }
        pages.push((key, generation, page));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;

    const PAGES: usize = 8;
    const MAX_PAGE_BYTES: usize = 256 * 1024;

    fn page(text: &str) -> RenderedPage {
        RenderedPage {
            body: Bytes::from(text.to_owned()),
            next: None,
        }
    }

    #[test]
    fn a_page_is_served_only_at_the_generation_it_was_rendered_at() {
        let cache = PageCache::history();
        cache.put((None, 100), 7, page("a"));
        assert_eq!(
            cache.get((None, 100), 7).map(|p| p.body),
            Some(Bytes::from("a"))
        );
        assert!(cache.get((None, 100), 8).is_none());
        assert!(cache.get((None, 50), 7).is_none());
        assert!(cache.get((Some(3), 100), 7).is_none());
    }

    #[test]
    fn a_newer_generation_drops_the_older_pages_and_an_older_page_is_not_kept() {
        let cache = PageCache::history();
        cache.put((None, 100), 7, page("old"));
        cache.put((Some(9), 100), 8, page("new"));
        assert!(cache.get((None, 100), 7).is_none());
        // Rendered from a read that began before the last commit: never kept.
        cache.put((None, 100), 7, page("late"));
        assert!(cache.get((None, 100), 7).is_none());
        assert!(cache.get((Some(9), 100), 8).is_some());
    }

    #[test]
    fn it_keeps_a_bounded_number_of_pages_and_no_large_one() {
        let cache = PageCache::history();
        for before in 0..(PAGES as u32 + 3) {
            cache.put((Some(before), 10), 1, page("p"));
        }
        assert_eq!(cache.pages.lock().map(|p| p.len()).unwrap_or(0), PAGES);
        // The oldest went first.
        assert!(cache.get((Some(0), 10), 1).is_none());
        assert!(cache.get((Some(PAGES as u32 + 2), 10), 1).is_some());
        let big = RenderedPage {
            body: Bytes::from(vec![b' '; MAX_PAGE_BYTES + 1]),
            next: None,
        };
        cache.put((None, 1000), 1, big);
        assert!(cache.get((None, 1000), 1).is_none());
    }

    #[test]
    fn the_vtxo_lists_keep_both_lists_of_a_generation_and_no_huge_one() {
        let cache = PageCache::vtxo_lists();
        cache.put(false, 3, page("unspent"));
        cache.put(true, 3, page("all"));
        assert_eq!(
            cache.get(false, 3).map(|p| p.body),
            Some(Bytes::from("unspent"))
        );
        assert_eq!(cache.get(true, 3).map(|p| p.body), Some(Bytes::from("all")));
        assert!(cache.get(false, 4).is_none(), "a commit since: a miss");
        let huge = RenderedPage {
            body: Bytes::from(vec![b' '; 8 * 1024 * 1024 + 1]),
            next: None,
        };
        cache.put(false, 4, huge);
        assert!(cache.get(false, 4).is_none());
    }

    #[test]
    fn the_exit_lists_are_kept_by_which_exits_and_history() {
        use crate::engine::ExitList;
        let cache = PageCache::exit_lists();
        cache.put((ExitList::All, false), 5, page("all"));
        cache.put((ExitList::All, true), 5, page("all, history"));
        cache.put((ExitList::Live, false), 5, page("live"));
        assert_eq!(
            cache.get((ExitList::All, true), 5).map(|p| p.body),
            Some(Bytes::from("all, history"))
        );
        assert!(cache.get((ExitList::Finished, false), 5).is_none());
        assert!(
            cache.get((ExitList::All, false), 6).is_none(),
            "a commit since"
        );
        let big = RenderedPage {
            body: Bytes::from(vec![b' '; 4 * 1024 * 1024 + 1]),
            next: None,
        };
        cache.put((ExitList::Finished, false), 6, big);
        assert!(cache.get((ExitList::Finished, false), 6).is_none());
    }
}
