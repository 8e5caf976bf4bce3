//! History pages as sent, kept until the wallet's database next changes.
//!
//! A phone app polls the first page of the history; rendering a page of 100 movements
//! as JSON (~47 KB) costs about a millisecond, far more than reading it. A page is kept
//! with the store's commit count read before the page was: any write to the wallet
//! database makes every kept page a miss, so a page is never served older than a read
//! would be. Bounded: a few pages, none larger than a quarter megabyte.

use std::sync::Mutex;

use crate::api::v1::common::RenderedPage;

/// Pages kept at most: the first page and a few more a client may be paging through.
const PAGES: usize = 8;
/// A larger page (up to 1,000 movements) is rendered for each request, not kept.
const MAX_PAGE_BYTES: usize = 256 * 1024;

/// Which page: `before` (the cursor) and `limit`.
pub type PageKey = (Option<u32>, usize);

#[derive(Default)]
pub struct PageCache {
    /// Most recently used last; all of one generation (older ones are dropped).
    pages: Mutex<Vec<(PageKey, u64, RenderedPage)>>,
}

impl PageCache {
    /// The page kept for `key`, if it was rendered at this store `generation`.
    pub fn get(&self, key: PageKey, generation: u64) -> Option<RenderedPage> {
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
    pub fn put(&self, key: PageKey, generation: u64, page: RenderedPage) {
        if page.body.len() > MAX_PAGE_BYTES {
            return;
        }
        let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
        // Pages of an older generation will never be served again; a newer one than
        // this page's means this page is already out of date.
        if pages.iter().any(|(_, g, _)| *g > generation) {
            return;
        }
        pages.retain(|(k, g, _)| *g == generation && *k != key);
        if pages.len() == PAGES {
            pages.remove(0);
        }
        pages.push((key, generation, page));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;

    fn page(text: &str) -> RenderedPage {
        RenderedPage {
            body: Bytes::from(text.to_owned()),
            next: None,
        }
    }

    #[test]
    fn a_page_is_served_only_at_the_generation_it_was_rendered_at() {
        let cache = PageCache::default();
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
        let cache = PageCache::default();
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
        let cache = PageCache::default();
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
}
